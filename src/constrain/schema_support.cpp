#include "constrain/schema_support.h"

#include <nlohmann/json.hpp>

#include <array>
#include <string_view>

namespace pagoda {

namespace {

// ordered_json: the rewritten schema keeps its properties in the order given, which is the
// order xgrammar generates them in (a sorted map would put "age" before "name").
using json = nlohmann::ordered_json;

// Keywords whose constraint the grammar cannot express; output would ignore them.
constexpr std::array kUnsupported = {"not", "if", "then", "else", "dependencies", "dependentRequired",
                                     "dependentSchemas", "unevaluatedProperties", "unevaluatedItems", "contains",
                                     "minContains", "maxContains", "propertyNames", "$dynamicRef", "$recursiveRef"};
// Keywords that constrain one type only. Without a `type` beside them xgrammar treats the
// schema as "any value" and drops them (`{"maximum": 3}` gave 9.9e64), so the type they
// imply is added: generating only values of that type is still valid under the schema.
struct TypedKeywords {
  const char* type;
  std::array<const char*, 7> keywords;
};
constexpr std::array<TypedKeywords, 4> kTyped = {{
    {"number", {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", nullptr, nullptr}},
    {"string", {"minLength", "maxLength", "pattern", "format", nullptr, nullptr, nullptr}},
    {"array", {"items", "prefixItems", "minItems", "maxItems", nullptr, nullptr, nullptr}},
    {"object", {"properties", "required", "additionalProperties", "patternProperties", "minProperties",
                "maxProperties", nullptr}},
}};
// Where subschemas sit: keyword -> how (a schema, a list of schemas, a map of schemas).
enum class Holds { kSchema, kList, kMap };
constexpr std::array<std::pair<std::string_view, Holds>, 11> kSubschemas = {{
    {"items", Holds::kSchema}, {"additionalItems", Holds::kSchema}, {"additionalProperties", Holds::kSchema},
    {"prefixItems", Holds::kList}, {"anyOf", Holds::kList}, {"oneOf", Holds::kList}, {"allOf", Holds::kList},
    {"properties", Holds::kMap}, {"patternProperties", Holds::kMap}, {"$defs", Holds::kMap},
    {"definitions", Holds::kMap},
}};

std::string pointer_child(const std::string& at, std::string_view key) {
  std::string k(key);
  for (size_t p = 0; (p = k.find('~', p)) != std::string::npos; p += 2) k.replace(p, 1, "~0");
  for (size_t p = 0; (p = k.find('/', p)) != std::string::npos; p += 2) k.replace(p, 1, "~1");
  return at + "/" + k;
}

Status check(json& s, const std::string& at) {
  if (s.is_boolean()) return Status::ok();
  if (!s.is_object()) return error("{}: a schema must be an object or a boolean", at.empty() ? "/" : at);
  const std::string where = at.empty() ? "the top level" : at;
  for (const char* k : kUnsupported)
    if (s.contains(k)) return error("'{}' (at {}) is not supported in structured output", k, where);
  if (s.contains("uniqueItems") && s["uniqueItems"] == true)
    return error("'uniqueItems' (at {}) is not supported in structured output", where);
  if (auto r = s.find("$ref"); r != s.end()) {
    if (!r->is_string() || !r->get<std::string>().starts_with("#"))
      return error("'$ref' (at {}): only references within the schema ('#/...') are supported", where);
  }
  // Draft 4's boolean exclusiveMinimum / exclusiveMaximum modify minimum / maximum.
  for (auto [excl, bound] : {std::pair{"exclusiveMinimum", "minimum"}, std::pair{"exclusiveMaximum", "maximum"}}) {
    auto e = s.find(excl);
    if (e == s.end() || !e->is_boolean()) continue;
    const bool on = e->get<bool>();
    s.erase(excl);
    if (on && s.contains(bound)) {
      s[excl] = s[bound];
      s.erase(bound);
    }
  }
  // allOf: one branch is that branch; several are merged by xgrammar only when they are
  // objects (it drops a number range in one of them).
  if (auto a = s.find("allOf"); a != s.end() && a->is_array() && a->size() > 1) {
    for (const json& b : *a) {
      const bool object = b.is_object() && (b.contains("properties") || b.contains("$ref") ||
                                            (b.contains("type") && b["type"] == "object"));
      if (!object)
        return error("'allOf' (at {}) is supported only over object schemas in structured output", where);
    }
  }
  // Draft 4-7 tuples: items as a list, additionalItems for the rest.
  if (auto it = s.find("items"); it != s.end() && it->is_array()) {
    json tuple = std::move(*it);
    s.erase("items");
    s["prefixItems"] = std::move(tuple);
    if (auto add = s.find("additionalItems"); add != s.end()) {
      s["items"] = std::move(*add);
      s.erase("additionalItems");
    }
  } else {
    s.erase("additionalItems");  // ignored without a tuple, as the drafts say
  }
  if (!s.contains("type") && !s.contains("const") && !s.contains("enum") && !s.contains("$ref")) {
    json implied = json::array();
    for (const TypedKeywords& t : kTyped)
      for (const char* k : t.keywords)
        if (k != nullptr && s.contains(k)) {
          implied.push_back(t.type);
          break;
        }
    if (implied.size() == 1) s["type"] = implied[0];
    else if (implied.size() > 1) s["type"] = std::move(implied);
  }
  for (const auto& [key, holds] : kSubschemas) {
    auto it = s.find(std::string(key));
    if (it == s.end()) continue;
    const std::string here = pointer_child(at, key);
    if (holds == Holds::kSchema) {
      PAGODA_TRY(check(*it, here));
    } else if (holds == Holds::kList) {
      if (!it->is_array()) return error("'{}' (at {}) must be a list of schemas", key, where);
      for (size_t i = 0; i < it->size(); ++i) PAGODA_TRY(check((*it)[i], pointer_child(here, std::to_string(i))));
    } else {
      if (!it->is_object()) return error("'{}' (at {}) must be an object", key, where);
      for (auto& [name, sub] : it->items()) PAGODA_TRY(check(sub, pointer_child(here, name)));
    }
  }
  return Status::ok();
}

}  // namespace

Result<std::string> prepare_json_schema(const std::string& schema_text) {
  json s = json::parse(schema_text, nullptr, false);
  if (s.is_discarded()) return error("the schema is not valid JSON");
  PAGODA_TRY(check(s, ""));
  return s.dump();
}

}  // namespace pagoda

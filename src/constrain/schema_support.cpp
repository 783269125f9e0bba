#include "constrain/schema_support.h"

#include "constrain/json_string_pattern.h"

#include "constrain/schema_merge.h"

#include <nlohmann/json.hpp>

#include <array>
#include <cmath>
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

Status check(json& s, const std::string& at, const json& root) {
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
  // What xgrammar would drop beside $ref / anyOf / oneOf / allOf / enum / const.
  PAGODA_TRY(schema::normalize_combinators(s, root, where));
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
  // Formats whose xgrammar pattern lets invalid values through ("01.2.3.4"'s leading zero,
  // which RFC 2673 readers take for octal; February 31): a stricter pattern of their own,
  // every value of which is valid (February 29 and leap seconds left out).
  if (auto f = s.find("format"); f != s.end() && f->is_string()) {
    static constexpr std::array<std::pair<std::string_view, std::string_view>, 3> kStrict = {{
        {"ipv4", R"(^((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])$)"},
        {"date", R"(^[1-9][0-9]{3}-(((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01]))|((0[469]|11)-(0[1-9]|[12][0-9]|30))|(02-(0[1-9]|1[0-9]|2[0-8])))$)"},
        {"date-time", R"(^[1-9][0-9]{3}-(((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01]))|((0[469]|11)-(0[1-9]|[12][0-9]|30))|(02-(0[1-9]|1[0-9]|2[0-8])))T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,6})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$)"},
    }};
    for (const auto& [name, pattern] : kStrict) {
      if (*f != name) continue;
      if (s.contains("pattern"))
        return error("'format' {} with a 'pattern' beside it (at {}) is not supported in structured output", name, where);
      s["pattern"] = std::string(pattern);
      s.erase("format");
      break;
    }
  }
  // The pattern is of the decoded string; xgrammar matches the JSON text (json_string_pattern.h).
  if (auto pat = s.find("pattern"); pat != s.end() && pat->is_string()) {
    auto over_text = pattern_over_json_text(pat->get<std::string>());
    if (!over_text) return error("{} (at {})", over_text.status().message(), where);
    *pat = *over_text;
  }
  if (auto pp = s.find("patternProperties"); pp != s.end() && pp->is_object()) {
    json renamed = json::object();
    for (auto& [key, sub] : pp->items()) {
      auto over_text = pattern_over_json_text(key);
      if (!over_text) return error("'patternProperties' {} (at {})", over_text.status().message(), where);
      renamed[*over_text] = std::move(sub);
    }
    *pp = std::move(renamed);
  }
  // xgrammar honours multipleOf on integers only: a whole multipleOf makes a number an
  // integer (every multiple is one), a fractional one cannot be generated exactly.
  if (auto m = s.find("multipleOf"); m != s.end() && m->is_number()) {
    const double step = m->get<double>();
    if (!(step > 0) || step != std::floor(step))
      return error("'multipleOf' {} (at {}) is supported only as a whole number in structured output", m->dump(), where);
    auto t = s.find("type");
    if (t != s.end() && *t == "number") *t = "integer";
    else if (t != s.end() && t->is_array())
      for (json& x : *t)
        if (x == "number") x = "integer";
  }
  for (const auto& [key, holds] : kSubschemas) {
    auto it = s.find(std::string(key));
    if (it == s.end()) continue;
    const std::string here = pointer_child(at, key);
    if (holds == Holds::kSchema) {
      PAGODA_TRY(check(*it, here, root));
    } else if (holds == Holds::kList) {
      if (!it->is_array()) return error("'{}' (at {}) must be a list of schemas", key, where);
      for (size_t i = 0; i < it->size(); ++i) PAGODA_TRY(check((*it)[i], pointer_child(here, std::to_string(i)), root));
    } else {
      if (!it->is_object()) return error("'{}' (at {}) must be an object", key, where);
      for (auto& [name, sub] : it->items()) PAGODA_TRY(check(sub, pointer_child(here, name), root));
    }
  }
  return Status::ok();
}

}  // namespace

Result<std::string> prepare_json_schema(const std::string& schema_text) {
  json s = json::parse(schema_text, nullptr, false);
  if (s.is_discarded()) return error("the schema is not valid JSON");
  // $refs resolve against the schema as given (a copy: the walk rewrites s).
  const json root = s;
  PAGODA_TRY(check(s, "", root));
  return s.dump();
}

}  // namespace pagoda

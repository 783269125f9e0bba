#include "constrain/schema_merge.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>
#include <string_view>

// decl = the value of a Result, or return its failure.
#define SCHEMA_CAT2(a, b) a##b
#define SCHEMA_CAT(a, b) SCHEMA_CAT2(a, b)
#define SCHEMA_TRY_ASSIGN(decl, expr)                                               \
  auto SCHEMA_CAT(schema_r_, __LINE__) = (expr);                                   \
  if (!SCHEMA_CAT(schema_r_, __LINE__)) return SCHEMA_CAT(schema_r_, __LINE__).status(); \
  decl = std::move(SCHEMA_CAT(schema_r_, __LINE__).value())

namespace pagoda::schema {
namespace {

constexpr std::array kAnnotations = {"title", "description", "$comment", "default", "examples", "deprecated",
                                     "readOnly", "writeOnly", "$schema", "$id", "$anchor", "discriminator",
                                     "contentMediaType", "contentEncoding", "$defs", "definitions", "strict"};

const std::array<std::string_view, 6> kLowerBounds = {"minimum", "exclusiveMinimum", "minLength", "minItems",
                                                      "minProperties", ""};
const std::array<std::string_view, 6> kUpperBounds = {"maximum", "exclusiveMaximum", "maxLength", "maxItems",
                                                      "maxProperties", ""};

bool has_constraints(const json& s, std::initializer_list<const char*> besides) {
  for (const auto& item : s.items()) {
    const std::string& k = item.key();
    if (is_annotation(k)) continue;
    if (std::find_if(besides.begin(), besides.end(), [&](const char* b) { return k == b; }) != besides.end()) continue;
    return true;
  }
  return false;
}

// A local $ref's target, followed through chains of $refs.
Result<json> resolve(const json& s, const json& root, const std::string& where) {
  json cur = s;
  for (int hops = 0; cur.is_object() && cur.contains("$ref"); ++hops) {
    if (hops == 16) return error("'$ref' (at {}) refers to itself", where);
    if (has_constraints(cur, {"$ref"}))
      return error("'$ref' (at {}) with constraints beside it is not supported in structured output", where);
    const std::string ref = cur["$ref"].get<std::string>();
    try {
      const json::json_pointer p(ref.substr(1));
      if (!root.contains(p)) return error("'$ref' (at {}): {} does not exist in the schema", where, ref);
      cur = root.at(p);
    } catch (const std::exception&) {
      return error("'$ref' (at {}): {} is not a JSON pointer", where, ref);
    }
  }
  return cur;
}

std::vector<std::string> types_of(const json& s) {
  std::vector<std::string> t;
  auto it = s.find("type");
  if (it == s.end()) return t;
  if (it->is_string()) t.push_back(it->get<std::string>());
  else if (it->is_array())
    for (const json& x : *it)
      if (x.is_string()) t.push_back(x.get<std::string>());
  return t;
}

std::string type_of_value(const json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "boolean";
  if (v.is_number_integer() || v.is_number_unsigned() ||
      (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>()))
    return "integer";
  if (v.is_number()) return "number";
  if (v.is_string()) return "string";
  if (v.is_array()) return "array";
  return "object";
}

bool type_allows(const std::vector<std::string>& types, const std::string& t) {
  for (const std::string& x : types)
    if (x == t || (x == "number" && t == "integer")) return true;
  return false;
}

size_t code_points(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// Whether v meets the simple keywords of s (type, bounds, lengths, multipleOf); nullopt
// when s holds another keyword this cannot decide.
std::optional<bool> satisfies(const json& v, const json& s) {
  for (const auto& [k, c] : s.items()) {
    if (is_annotation(k) || k == "enum" || k == "const") continue;
    if (k == "type") {
      if (!type_allows(types_of(s), type_of_value(v))) return false;
    } else if (k == "minimum" || k == "maximum" || k == "exclusiveMinimum" || k == "exclusiveMaximum") {
      if (!v.is_number() || !c.is_number()) continue;  // applies to numbers only
      const double x = v.get<double>(), b = c.get<double>();
      if ((k == "minimum" && x < b) || (k == "maximum" && x > b) || (k == "exclusiveMinimum" && x <= b) ||
          (k == "exclusiveMaximum" && x >= b))
        return false;
    } else if (k == "multipleOf") {
      if (!v.is_number() || !c.is_number() || c.get<double>() <= 0) continue;
      const double q = v.get<double>() / c.get<double>();
      if (std::abs(q - std::round(q)) > 1e-9) return false;
    } else if (k == "minLength" || k == "maxLength") {
      if (!v.is_string() || !c.is_number()) continue;
      const double n = static_cast<double>(code_points(v.get<std::string>()));
      if ((k == "minLength" && n < c.get<double>()) || (k == "maxLength" && n > c.get<double>())) return false;
    } else if (v.is_object() || v.is_array()) {
      return std::nullopt;  // a structural keyword on a structured value
    } else if (k == "pattern" || k == "format") {
      if (v.is_string()) return std::nullopt;
    } else if (k == "items" || k == "prefixItems" || k == "minItems" || k == "maxItems" || k == "properties" ||
               k == "required" || k == "additionalProperties" || k == "patternProperties" || k == "minProperties" ||
               k == "maxProperties") {
      continue;  // applies to arrays / objects only
    } else {
      return std::nullopt;
    }
  }
  return true;
}

// enum / const with keywords beside them: only the values those keywords accept stay.
Status filter_values(json& s, const std::string& where) {
  const bool is_const = s.contains("const");
  if (!is_const && !s.contains("enum")) return Status::ok();
  if (!has_constraints(s, {"enum", "const"})) return Status::ok();
  json values = is_const ? json::array({s["const"]}) : s["enum"];
  if (!values.is_array()) return error("'enum' (at {}) must be a list", where);
  json kept = json::array();
  for (const json& v : values) {
    auto ok = satisfies(v, s);
    if (!ok)
      return error("'{}' (at {}) with keywords beside it that constrain structured values is not supported in "
                   "structured output",
                   is_const ? "const" : "enum", where);
    if (*ok) kept.push_back(v);
  }
  if (kept.empty()) return error("the schema at {} cannot be satisfied: no value of its enum/const passes the rest", where);
  json out = json::object();
  for (const auto& [k, v] : s.items())
    if (is_annotation(k)) out[k] = v;
  out["enum"] = std::move(kept);
  s = std::move(out);
  return Status::ok();
}

std::vector<json> value_set(const json& s) {
  if (s.contains("const")) return {s["const"]};
  if (s.contains("enum") && s["enum"].is_array()) return std::vector<json>(s["enum"].begin(), s["enum"].end());
  return {};
}

bool disjoint_values(const json& a, const json& b) {
  const auto va = value_set(a), vb = value_set(b);
  if (va.empty() || vb.empty()) return false;
  for (const json& x : va)
    for (const json& y : vb)
      if (x == y) return false;
  return true;
}

bool disjoint_types(const json& a, const json& b) {
  const auto ta = types_of(a), tb = types_of(b);
  if (ta.empty() || tb.empty()) return false;
  for (const std::string& x : ta)
    for (const std::string& y : tb)
      if (type_allows({x}, y) || type_allows({y}, x)) return false;
  return true;
}

bool required_has(const json& s, const std::string& name) {
  auto r = s.find("required");
  if (r == s.end() || !r->is_array()) return false;
  return std::find(r->begin(), r->end(), json(name)) != r->end();
}

// No value can match both a and b.
bool provably_disjoint(const json& a, const json& b, const json& root) {
  auto ra = resolve(a, root, ""), rb = resolve(b, root, "");
  if (!ra || !rb) return false;
  const json& x = *ra;
  const json& y = *rb;
  if (x.is_boolean() || y.is_boolean()) return x == json(false) || y == json(false);
  if (disjoint_types(x, y) || disjoint_values(x, y)) return true;
  auto px = x.find("properties"), py = y.find("properties");
  if (px == x.end() || py == y.end() || !px->is_object() || !py->is_object()) return false;
  for (const auto& [name, sx] : px->items()) {
    auto sy = py->find(name);
    if (sy == py->end() || !required_has(x, name) || !required_has(y, name)) continue;
    auto rx = resolve(sx, root, ""), ry = resolve(*sy, root, "");
    if (rx && ry && (disjoint_values(*rx, *ry) || disjoint_types(*rx, *ry))) return true;
  }
  return false;
}

json as_type_list(const std::vector<std::string>& t) {
  if (t.size() == 1) return t[0];
  json a = json::array();
  for (const auto& x : t) a.push_back(x);
  return a;
}

int64_t gcd64(int64_t a, int64_t b) { return b == 0 ? a : gcd64(b, a % b); }

}  // namespace

bool is_annotation(const std::string& k) {
  return std::find(kAnnotations.begin(), kAnnotations.end(), k) != kAnnotations.end();
}

Result<json> merge(const json& a_in, const json& b_in, const json& root, const std::string& where) {
  SCHEMA_TRY_ASSIGN(json a, resolve(a_in, root, where));
  SCHEMA_TRY_ASSIGN(json b, resolve(b_in, root, where));
  if (a.is_boolean() || b.is_boolean()) {
    if (a == json(false) || b == json(false)) return error("the schema at {} cannot be satisfied (allOf with false)", where);
    return a.is_boolean() ? b : a;
  }
  if (!a.is_object() || !b.is_object()) return error("{}: a schema must be an object or a boolean", where);
  for (const char* k : {"allOf", "anyOf", "oneOf"})
    if (a.contains(k) || b.contains(k))
      return error("'{}' (at {}) nested in an allOf is not supported in structured output", k, where);
  json out = a;
  // Objects: additionalProperties false in a part allows only that part's properties.
  std::optional<std::vector<std::string>> allowed;
  for (const json* part : {&a, &b}) {
    auto ap = part->find("additionalProperties");
    if (ap == part->end()) continue;
    if (ap->is_object())
      return error("'allOf' (at {}) over a schema with additionalProperties as a schema is not supported in "
                   "structured output", where);
    if (*ap == json(false)) {
      std::vector<std::string> names;
      if (auto p = part->find("properties"); p != part->end() && p->is_object())
        for (const auto& [n, _] : p->items()) names.push_back(n);
      if (!allowed) {
        allowed = names;
      } else {
        std::vector<std::string> both;
        for (const auto& n : *allowed)
          if (std::find(names.begin(), names.end(), n) != names.end()) both.push_back(n);
        allowed = both;
      }
    }
  }
  for (const auto& [k, v] : b.items()) {
    if (is_annotation(k) || k == "additionalProperties") continue;
    auto it = out.find(k);
    if (it == out.end()) {
      out[k] = v;
      continue;
    }
    json& mine = *it;
    if (mine == v) continue;
    if (k == "type") {
      std::vector<std::string> both;
      for (const auto& x : types_of(a))
        for (const auto& y : types_of(b)) {
          if (x == y || (x == "number" && y == "integer")) both.push_back(y);
          else if (x == "integer" && y == "number") both.push_back(x);
        }
      if (both.empty()) return error("the schema at {} cannot be satisfied: allOf of disjoint types", where);
      mine = as_type_list(both);
    } else if (k == "properties") {
      if (!mine.is_object() || !v.is_object()) return error("'properties' (at {}) must be an object", where);
      for (const auto& [name, sub] : v.items()) {
        if (mine.contains(name)) {
          SCHEMA_TRY_ASSIGN(json m, merge(mine[name], sub, root, where + "/properties/" + name));
          mine[name] = std::move(m);
        } else {
          mine[name] = sub;
        }
      }
    } else if (k == "required") {
      for (const json& n : v)
        if (std::find(mine.begin(), mine.end(), n) == mine.end()) mine.push_back(n);
    } else if (k == "items") {
      SCHEMA_TRY_ASSIGN(json m, merge(mine, v, root, where + "/items"));
      mine = std::move(m);
    } else if (std::find(kLowerBounds.begin(), kLowerBounds.end(), k) != kLowerBounds.end() && mine.is_number() &&
               v.is_number()) {
      if (v.get<double>() > mine.get<double>()) mine = v;
    } else if (std::find(kUpperBounds.begin(), kUpperBounds.end(), k) != kUpperBounds.end() && mine.is_number() &&
               v.is_number()) {
      if (v.get<double>() < mine.get<double>()) mine = v;
    } else if (k == "multipleOf" && mine.is_number_integer() && v.is_number_integer() && mine.get<int64_t>() > 0 &&
               v.get<int64_t>() > 0) {
      const int64_t x = mine.get<int64_t>(), y = v.get<int64_t>();
      mine = x / gcd64(x, y) * y;
    } else if (k == "enum" || k == "const") {
      json inter = json::array();
      for (const json& x : value_set(out))
        for (const json& y : value_set(b))
          if (x == y) inter.push_back(x);
      if (inter.empty()) return error("the schema at {} cannot be satisfied: allOf of disjoint enums", where);
      out.erase("const");
      out["enum"] = std::move(inter);
    } else {
      return error("'allOf' (at {}) with two different '{}' is not supported in structured output", where, k);
    }
  }
  if (allowed) {
    out["additionalProperties"] = false;
    if (auto p = out.find("properties"); p != out.end()) {
      json kept = json::object();
      for (const auto& [n, sub] : p->items())
        if (std::find(allowed->begin(), allowed->end(), n) != allowed->end()) kept[n] = sub;
      *p = std::move(kept);
    }
    if (auto r = out.find("required"); r != out.end())
      for (const json& n : *r)
        if (!n.is_string() || std::find(allowed->begin(), allowed->end(), n.get<std::string>()) == allowed->end())
          return error("the schema at {} cannot be satisfied: '{}' is required but not allowed", where,
                       n.is_string() ? n.get<std::string>() : n.dump());
  }
  return out;
}

Status normalize_combinators(json& s, const json& root, const std::string& where) {
  if (!s.is_object()) return Status::ok();
  if (s.contains("$ref") && has_constraints(s, {"$ref"}))
    return error("'$ref' (at {}) with constraints beside it is not supported in structured output", where);
  if (auto all = s.find("allOf"); all != s.end()) {
    if (!all->is_array() || all->empty()) return error("'allOf' (at {}) must be a non-empty list of schemas", where);
    json parts = std::move(*all);
    s.erase("allOf");
    json merged = s;
    for (size_t i = 0; i < parts.size(); ++i) {
      SCHEMA_TRY_ASSIGN(json m, merge(merged, parts[i], root, where + "/allOf/" + std::to_string(i)));
      merged = std::move(m);
    }
    s = std::move(merged);
  }
  for (const char* key : {"anyOf", "oneOf"}) {
    auto it = s.find(key);
    if (it == s.end()) continue;
    if (!it->is_array() || it->empty()) return error("'{}' (at {}) must be a non-empty list of schemas", key, where);
    const bool one_of = std::string_view(key) == "oneOf";
    if (s.contains(one_of ? "anyOf" : "oneOf"))
      return error("'anyOf' and 'oneOf' together (at {}) are not supported in structured output", where);
    json branches = *it;
    if (has_constraints(s, {key})) {
      // Keywords beside the union belong to every branch.
      json base = s;
      base.erase(key);
      json kept = json::array();
      for (size_t i = 0; i < branches.size(); ++i) {
        auto m = merge(base, branches[i], root, where + "/" + key + "/" + std::to_string(i));
        if (m) kept.push_back(std::move(m.value()));
        else if (m.status().message().find("cannot be satisfied") == std::string::npos) return m.status();
      }
      if (kept.empty()) return error("the schema at {} cannot be satisfied: no branch of its {} fits the rest", where, key);
      json out = json::object();
      for (const auto& [k, v] : s.items())
        if (is_annotation(k)) out[k] = v;
      out[key] = std::move(kept);
      s = std::move(out);
      branches = s[key];
    }
    if (one_of) {
      for (size_t i = 0; i < branches.size(); ++i)
        for (size_t j = i + 1; j < branches.size(); ++j)
          if (!provably_disjoint(branches[i], branches[j], root))
            return error("'oneOf' (at {}) with branches {} and {} that may both match one value is not supported in "
                         "structured output (use anyOf, or tell them apart by type or by a required const property)",
                         where, i, j);
    }
  }
  return filter_values(s, where);
}

}  // namespace pagoda::schema

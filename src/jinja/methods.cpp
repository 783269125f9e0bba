// Python methods of str, dict, list and tuple values that templates call
// (message.content.strip(), tool.items(), ...). Methods that would modify a list or
// dict are refused, as jinja2's ImmutableSandboxedEnvironment refuses them.
#include <unordered_map>

#include "jinja/builtins.h"
#include "jinja/eval.h"
#include "jinja/format.h"
#include "jinja/pystr.h"
#include "text/unicode_class.h"
#include "text/utf8.h"

namespace pagoda::jinja {
namespace {

using Method = Value (*)(Interpreter&, const Value& self, CallArgs&);
using Args = std::vector<std::optional<Value>>;

std::optional<std::string> opt_string(std::string_view fn, const std::optional<Value>& v) {
  if (!v || v->is_none()) return std::nullopt;
  return arg_string(fn, *v);
}

Value string_list(std::vector<std::string> parts) {
  std::vector<Value> out;
  out.reserve(parts.size());
  for (std::string& p : parts) out.emplace_back(std::move(p));
  return Value::list(std::move(out));
}

// ---- str ----------------------------------------------------------------------

Value strip_impl(const Value& self, CallArgs& a, const char* fn, bool left, bool right) {
  Args p = bind_args(fn, a, {"chars"});
  return Value(std::string(py_strip(self.str(), opt_string(fn, p[0]), left, right)));
}
Value s_strip(Interpreter&, const Value& s, CallArgs& a) { return strip_impl(s, a, "strip", true, true); }
Value s_lstrip(Interpreter&, const Value& s, CallArgs& a) { return strip_impl(s, a, "lstrip", true, false); }
Value s_rstrip(Interpreter&, const Value& s, CallArgs& a) { return strip_impl(s, a, "rstrip", false, true); }

Value split_impl(const Value& self, CallArgs& a, const char* fn, bool reverse) {
  Args p = bind_args(fn, a, {"sep", "maxsplit"});
  std::optional<std::string> sep = opt_string(fn, p[0]);
  if (sep && sep->empty()) fail("empty separator");
  const int64_t maxsplit = p[1] ? arg_int(fn, *p[1]) : -1;
  return string_list(reverse ? py_rsplit(self.str(), sep, maxsplit) : py_split(self.str(), sep, maxsplit));
}
Value s_split(Interpreter&, const Value& s, CallArgs& a) { return split_impl(s, a, "split", false); }
Value s_rsplit(Interpreter&, const Value& s, CallArgs& a) { return split_impl(s, a, "rsplit", true); }

Value s_splitlines(Interpreter&, const Value& s, CallArgs& a) {
  Args p = bind_args("splitlines", a, {"keepends"});
  return string_list(py_splitlines(s.str(), p[0] && truthy(*p[0])));
}

Value s_upper(Interpreter&, const Value& s, CallArgs& a) { bind_args("upper", a, {}); return Value(py_upper(s.str())); }
Value s_lower(Interpreter&, const Value& s, CallArgs& a) { bind_args("lower", a, {}); return Value(py_lower(s.str())); }
Value s_title(Interpreter&, const Value& s, CallArgs& a) { bind_args("title", a, {}); return Value(py_title(s.str())); }
Value s_capitalize(Interpreter&, const Value& s, CallArgs& a) { bind_args("capitalize", a, {}); return Value(py_capitalize(s.str())); }
Value s_swapcase(Interpreter&, const Value& s, CallArgs& a) { bind_args("swapcase", a, {}); return Value(py_swapcase(s.str())); }

Value s_replace(Interpreter&, const Value& s, CallArgs& a) {
  Args p = bind_args("replace", a, {"old", "new", "count"});
  if (!p[0] || !p[1]) fail("replace() takes at least 2 arguments");
  std::string out = py_replace(s.str(), arg_string("replace", *p[0]), arg_string("replace", *p[1]),
                               p[2] ? arg_int("replace", *p[2]) : -1);
  if (out.size() > kMaxStringBytes) fail("string result too large");
  return Value(std::move(out));
}

// startswith / endswith take a str or a tuple of them.
Value affix_impl(const Value& self, CallArgs& a, const char* fn, bool prefix) {
  Args p = bind_args(fn, a, {"affix"});
  if (!p[0]) fail(std::string(fn) + "() takes at least 1 argument");
  std::vector<Value> options = p[0]->is_tuple() ? p[0]->items() : std::vector<Value>{*p[0]};
  const std::string& s = self.str();
  for (const Value& o : options) {
    if (!o.is_string())
      fail(std::string(fn) + " first arg must be str or a tuple of str, not " + type_name(o));
    const std::string& x = o.str();
    if (x.size() <= s.size() &&
        s.compare(prefix ? 0 : s.size() - x.size(), x.size(), x) == 0)
      return Value(true);
  }
  return Value(false);
}
Value s_startswith(Interpreter&, const Value& s, CallArgs& a) { return affix_impl(s, a, "startswith", true); }
Value s_endswith(Interpreter&, const Value& s, CallArgs& a) { return affix_impl(s, a, "endswith", false); }

Value find_impl(const Value& self, CallArgs& a, const char* fn, bool reverse, bool must_find) {
  Args p = bind_args(fn, a, {"sub"});
  if (!p[0]) fail(std::string(fn) + "() takes at least 1 argument");
  int64_t at = py_find(self.str(), arg_string(fn, *p[0]), reverse);
  if (must_find && at < 0) fail("substring not found");
  return Value(at);
}
Value s_find(Interpreter&, const Value& s, CallArgs& a) { return find_impl(s, a, "find", false, false); }
Value s_rfind(Interpreter&, const Value& s, CallArgs& a) { return find_impl(s, a, "rfind", true, false); }
Value s_index(Interpreter&, const Value& s, CallArgs& a) { return find_impl(s, a, "index", false, true); }
Value s_rindex(Interpreter&, const Value& s, CallArgs& a) { return find_impl(s, a, "rindex", true, true); }

Value s_count(Interpreter&, const Value& s, CallArgs& a) {
  Args p = bind_args("count", a, {"sub"});
  if (!p[0]) fail("count() takes at least 1 argument");
  return Value(py_count(s.str(), arg_string("count", *p[0])));
}

Value s_join(Interpreter& in, const Value& s, CallArgs& a) {
  Args p = bind_args("join", a, {"iterable"});
  if (!p[0]) fail("join() takes exactly one argument");
  std::string out;
  size_t i = 0;
  for (const Value& item : in.iterate(*p[0])) {
    if (!item.is_string())
      fail("sequence item " + std::to_string(i) + ": expected str instance, " + type_name(item) + " found");
    if (i++) out += s.str();
    out += item.str();
    if (out.size() > kMaxStringBytes) fail("string result too large");
  }
  return Value(std::move(out));
}

Value s_format(Interpreter&, const Value& s, CallArgs& a) { return Value(brace_format(s.str(), a)); }

// is* predicates: true when the string is non-empty and every character passes.
template <bool (*Pred)(uint32_t)>
Value char_predicate(const Value& self, CallArgs& a, const char* fn) {
  bind_args(fn, a, {});
  const std::string& s = self.str();
  if (s.empty()) return Value(false);
  for (size_t i = 0; i < s.size();) {
    utf8::Char c = utf8::decode(s, i);
    if (c.cp == utf8::kInvalid || !Pred(c.cp)) return Value(false);
    i += c.len;
  }
  return Value(true);
}
bool is_digit_cp(uint32_t c) { return (c >= '0' && c <= '9') || (c >= 0x80 && unicode_class(c) == UnicodeClass::kNumber); }
bool is_alpha_cp(uint32_t c) { return unicode_class(c) == UnicodeClass::kLetter; }
bool is_alnum_cp(uint32_t c) { return is_alpha_cp(c) || unicode_class(c) == UnicodeClass::kNumber; }
bool is_space_cp(uint32_t c) { return is_py_space(c); }
Value s_isdigit(Interpreter&, const Value& s, CallArgs& a) { return char_predicate<is_digit_cp>(s, a, "isdigit"); }
Value s_isnumeric(Interpreter&, const Value& s, CallArgs& a) { return char_predicate<is_digit_cp>(s, a, "isnumeric"); }
Value s_isdecimal(Interpreter&, const Value& s, CallArgs& a) { return char_predicate<is_digit_cp>(s, a, "isdecimal"); }
Value s_isalpha(Interpreter&, const Value& s, CallArgs& a) { return char_predicate<is_alpha_cp>(s, a, "isalpha"); }
Value s_isalnum(Interpreter&, const Value& s, CallArgs& a) { return char_predicate<is_alnum_cp>(s, a, "isalnum"); }
Value s_isspace(Interpreter&, const Value& s, CallArgs& a) { return char_predicate<is_space_cp>(s, a, "isspace"); }
Value s_islower(Interpreter&, const Value& s, CallArgs& a) { bind_args("islower", a, {}); return Value(py_islower(s.str())); }
Value s_isupper(Interpreter&, const Value& s, CallArgs& a) { bind_args("isupper", a, {}); return Value(py_isupper(s.str())); }

// center / ljust / rjust with an optional one-character fill.
Value justify(const Value& self, CallArgs& a, const char* fn, char align) {
  Args p = bind_args(fn, a, {"width", "fillchar"});
  if (!p[0]) fail(std::string(fn) + "() takes at least 1 argument");
  const int64_t width = arg_int(fn, *p[0]);
  std::string fill = p[1] ? arg_string(fn, *p[1]) : " ";
  if (char_count(fill) != 1) fail("The fill character must be exactly one character long");
  const auto len = static_cast<int64_t>(char_count(self.str()));
  if (width <= len) return self;
  if (width > static_cast<int64_t>(kMaxStringBytes) / 4) fail("string result too large");
  const int64_t marg = width - len;
  int64_t left = align == '<' ? 0 : align == '>' ? marg : marg / 2 + (marg & width & 1);
  std::string out;
  for (int64_t i = 0; i < left; ++i) out += fill;
  out += self.str();
  for (int64_t i = 0; i < marg - left; ++i) out += fill;
  return Value(std::move(out));
}
Value s_center(Interpreter&, const Value& s, CallArgs& a) { return justify(s, a, "center", '^'); }
Value s_ljust(Interpreter&, const Value& s, CallArgs& a) { return justify(s, a, "ljust", '<'); }
Value s_rjust(Interpreter&, const Value& s, CallArgs& a) { return justify(s, a, "rjust", '>'); }

Value s_zfill(Interpreter&, const Value& s, CallArgs& a) {
  Args p = bind_args("zfill", a, {"width"});
  if (!p[0]) fail("zfill() takes exactly one argument");
  const int64_t width = arg_int("zfill", *p[0]);
  std::string str = s.str();
  const auto len = static_cast<int64_t>(char_count(str));
  if (width <= len) return s;
  if (width > static_cast<int64_t>(kMaxStringBytes)) fail("string result too large");
  size_t sign = (!str.empty() && (str[0] == '+' || str[0] == '-')) ? 1 : 0;
  str.insert(sign, static_cast<size_t>(width - len), '0');
  return Value(std::move(str));
}

Value affix_remove(const Value& self, CallArgs& a, const char* fn, bool prefix) {
  Args p = bind_args(fn, a, {"affix"});
  if (!p[0]) fail(std::string(fn) + "() takes exactly one argument");
  const std::string x = arg_string(fn, *p[0]);
  const std::string& s = self.str();
  if (x.size() > s.size()) return self;
  if (prefix && s.compare(0, x.size(), x) == 0) return Value(s.substr(x.size()));
  if (!prefix && s.compare(s.size() - x.size(), x.size(), x) == 0) return Value(s.substr(0, s.size() - x.size()));
  return self;
}
Value s_removeprefix(Interpreter&, const Value& s, CallArgs& a) { return affix_remove(s, a, "removeprefix", true); }
Value s_removesuffix(Interpreter&, const Value& s, CallArgs& a) { return affix_remove(s, a, "removesuffix", false); }

Value partition_impl(const Value& self, CallArgs& a, const char* fn, bool reverse) {
  Args p = bind_args(fn, a, {"sep"});
  if (!p[0]) fail(std::string(fn) + "() takes exactly one argument");
  const std::string sep = arg_string(fn, *p[0]);
  if (sep.empty()) fail("empty separator");
  const std::string& s = self.str();
  size_t at = reverse ? s.rfind(sep) : s.find(sep);
  if (at == std::string::npos)
    return reverse ? Value::tuple({Value(""), Value(""), self}) : Value::tuple({self, Value(""), Value("")});
  return Value::tuple({Value(s.substr(0, at)), Value(sep), Value(s.substr(at + sep.size()))});
}
Value s_partition(Interpreter&, const Value& s, CallArgs& a) { return partition_impl(s, a, "partition", false); }
Value s_rpartition(Interpreter&, const Value& s, CallArgs& a) { return partition_impl(s, a, "rpartition", true); }

const std::unordered_map<std::string_view, Method>& string_methods() {
  static const std::unordered_map<std::string_view, Method> table = {
      {"strip", s_strip},         {"lstrip", s_lstrip},         {"rstrip", s_rstrip},
      {"split", s_split},         {"rsplit", s_rsplit},         {"splitlines", s_splitlines},
      {"upper", s_upper},         {"lower", s_lower},           {"casefold", s_lower},
      {"title", s_title},         {"capitalize", s_capitalize}, {"swapcase", s_swapcase},
      {"replace", s_replace},     {"startswith", s_startswith}, {"endswith", s_endswith},
      {"find", s_find},           {"rfind", s_rfind},           {"index", s_index},
      {"rindex", s_rindex},       {"count", s_count},           {"join", s_join},
      {"format", s_format},       {"isdigit", s_isdigit},       {"isnumeric", s_isnumeric},
      {"isdecimal", s_isdecimal}, {"isalpha", s_isalpha},       {"isalnum", s_isalnum},
      {"isspace", s_isspace},     {"islower", s_islower},       {"isupper", s_isupper},
      {"center", s_center},       {"ljust", s_ljust},           {"rjust", s_rjust},
      {"zfill", s_zfill},         {"removeprefix", s_removeprefix}, {"removesuffix", s_removesuffix},
      {"partition", s_partition}, {"rpartition", s_rpartition},
  };
  return table;
}

// ---- dict ---------------------------------------------------------------------

Value d_get(Interpreter&, const Value& d, CallArgs& a) {
  Args p = bind_args("get", a, {"key", "default"});
  if (!p[0]) fail("get expected at least 1 argument, got 0");
  const Value* v = d.dict().find(*p[0]);
  if (v) return *v;
  return p[1] ? *p[1] : Value::none();
}

Value d_items(Interpreter&, const Value& d, CallArgs& a) {
  bind_args("items", a, {});
  std::vector<Value> out;
  for (const auto& [k, v] : d.dict().entries()) out.push_back(Value::tuple({k, v}));
  return Value::list(std::move(out));
}

Value d_keys(Interpreter&, const Value& d, CallArgs& a) {
  bind_args("keys", a, {});
  std::vector<Value> out;
  for (const auto& [k, v] : d.dict().entries()) out.push_back(k);
  return Value::list(std::move(out));
}

Value d_values(Interpreter&, const Value& d, CallArgs& a) {
  bind_args("values", a, {});
  std::vector<Value> out;
  for (const auto& [k, v] : d.dict().entries()) out.push_back(v);
  return Value::list(std::move(out));
}

Value d_copy(Interpreter&, const Value& d, CallArgs& a) {
  bind_args("copy", a, {});
  return Value::dict(d.dict());
}

const std::unordered_map<std::string_view, Method>& dict_methods() {
  static const std::unordered_map<std::string_view, Method> table = {
      {"get", d_get}, {"items", d_items}, {"keys", d_keys}, {"values", d_values}, {"copy", d_copy},
  };
  return table;
}

// ---- list / tuple -------------------------------------------------------------

Value l_index(Interpreter&, const Value& l, CallArgs& a) {
  Args p = bind_args("index", a, {"value"});
  if (!p[0]) fail("index expected at least 1 argument, got 0");
  const auto& items = l.items();
  for (size_t i = 0; i < items.size(); ++i)
    if (equal(items[i], *p[0])) return Value(static_cast<int64_t>(i));
  fail(to_repr(*p[0]) + " is not in list");
}

Value l_count(Interpreter&, const Value& l, CallArgs& a) {
  Args p = bind_args("count", a, {"value"});
  if (!p[0]) fail("count() takes exactly one argument (0 given)");
  int64_t n = 0;
  for (const Value& x : l.items()) n += equal(x, *p[0]);
  return Value(n);
}

Value l_copy(Interpreter&, const Value& l, CallArgs& a) {
  bind_args("copy", a, {});
  return Value::list(l.items());
}

const std::unordered_map<std::string_view, Method>& list_methods() {
  static const std::unordered_map<std::string_view, Method> table = {
      {"index", l_index}, {"count", l_count}, {"copy", l_copy},
  };
  return table;
}

bool is_mutating(const Value& obj, std::string_view name) {
  static const std::string_view kList[] = {"append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse"};
  static const std::string_view kDict[] = {"pop", "popitem", "update", "clear", "setdefault"};
  if (obj.is_list())
    for (std::string_view m : kList)
      if (m == name) return true;
  if (obj.is_dict())
    for (std::string_view m : kDict)
      if (m == name) return true;
  return false;
}

}  // namespace

std::optional<Value> find_method(const Value& obj, const std::string& name) {
  const std::unordered_map<std::string_view, Method>* table = nullptr;
  if (obj.is_string()) table = &string_methods();
  if (obj.is_dict()) table = &dict_methods();
  if (obj.is_sequence()) table = &list_methods();
  if (!table) return std::nullopt;
  if (is_mutating(obj, name))
    return Value::undefined("access to attribute '" + name + "' of '" + type_name(obj) +
                            "' object is unsafe.");
  auto it = table->find(name);
  if (it == table->end() || (obj.is_tuple() && name == "copy")) return std::nullopt;
  Method m = it->second;
  return Value::callable("<built-in method " + name + " of " + type_name(obj) + " object>",
                         [obj, m](Interpreter& in, CallArgs& args) { return m(in, obj, args); });
}

}  // namespace pagoda::jinja

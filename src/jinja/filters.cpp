// jinja2's builtin filters (filters.py in jinja2 3.1), plus transformers' tojson.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unordered_map>

#include "jinja/builtins.h"
#include "jinja/eval.h"
#include "jinja/format.h"
#include "jinja/json.h"
#include "jinja/ops.h"
#include "jinja/pystr.h"
#include "text/unicode_class.h"
#include "text/utf8.h"

namespace pagoda::jinja {
namespace {

using Args = std::vector<std::optional<Value>>;

// jinja2's soft_str: what a filter expecting text makes of any value.
std::string text(const Value& v) { return v.is_string() ? v.str() : to_str(v); }

bool flag(const std::optional<Value>& v, bool dflt) { return v ? truthy(*v) : dflt; }

int64_t py_len(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kString: return static_cast<int64_t>(char_count(v.str()));
    case Value::Kind::kList:
    case Value::Kind::kTuple: return static_cast<int64_t>(v.items().size());
    case Value::Kind::kDict: return static_cast<int64_t>(v.dict().size());
    case Value::Kind::kUndefined: return 0;
    default: fail("object of type '" + type_name(v) + "' has no len()");
  }
}

// Sort keys compare case-insensitively unless case_sensitive (jinja2's ignore_case).
Value fold_case(const Value& v, bool case_sensitive) {
  return (!case_sensitive && v.is_string()) ? Value(py_lower(v.str())) : v;
}

// The key of `item` for sort/unique/min/max: the item, or its attribute(s).
Value sort_key(Interpreter& in, const Value& item, const std::optional<Value>& attribute,
               bool case_sensitive, bool multi) {
  if (!attribute || attribute->is_none()) return fold_case(item, case_sensitive);
  if (multi && attribute->is_string() && attribute->str().find(',') != std::string::npos) {
    std::vector<Value> keys;
    for (const std::string& part : py_split(attribute->str(), std::string(","), -1))
      keys.push_back(fold_case(get_attribute_path(in, item, Value(part)), case_sensitive));
    return Value::list(std::move(keys));
  }
  return fold_case(get_attribute_path(in, item, *attribute), case_sensitive);
}

// Python's float(str): optional whitespace, sign, digits with single underscores,
// inf / nan. Returns nullopt where Python raises ValueError.
std::optional<double> parse_float(const std::string& s) {
  std::string t(py_strip(s, std::nullopt, true, true));
  std::string clean;
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] == '_') {
      bool between = i > 0 && i + 1 < t.size() && isdigit(static_cast<unsigned char>(t[i - 1])) &&
                     isdigit(static_cast<unsigned char>(t[i + 1]));
      if (!between) return std::nullopt;
      continue;
    }
    clean += t[i];
  }
  if (clean.empty() || clean.find_first_of("xXpP") != std::string::npos) return std::nullopt;
  char* end = nullptr;
  double d = std::strtod(clean.c_str(), &end);
  if (end != clean.c_str() + clean.size()) return std::nullopt;
  return d;
}

// Python's int(str, base): whitespace, sign, digits with single underscores.
std::optional<int64_t> parse_int(const std::string& s, int64_t base) {
  std::string t(py_strip(s, std::nullopt, true, true));
  size_t i = 0;
  bool negative = false;
  if (i < t.size() && (t[i] == '+' || t[i] == '-')) negative = t[i++] == '-';
  if (base == 16 && t.compare(i, 2, "0x") == 0) i += 2;
  if (base == 8 && t.compare(i, 2, "0o") == 0) i += 2;
  if (base == 2 && t.compare(i, 2, "0b") == 0) i += 2;
  if (base < 2 || base > 36 || i >= t.size()) return std::nullopt;
  int64_t v = 0;
  bool last_digit = false;
  for (; i < t.size(); ++i) {
    char c = t[i];
    if (c == '_') {
      if (!last_digit) return std::nullopt;
      last_digit = false;
      continue;
    }
    int d = isdigit(static_cast<unsigned char>(c)) ? c - '0'
            : isalpha(static_cast<unsigned char>(c)) ? (c | 0x20) - 'a' + 10 : 99;
    if (d >= base) return std::nullopt;
    if (__builtin_mul_overflow(v, base, &v) || __builtin_add_overflow(v, d, &v)) return std::nullopt;
    last_digit = true;
  }
  if (!last_digit) return std::nullopt;
  return negative ? -v : v;
}

std::optional<int64_t> float_to_int(double d) {
  if (!std::isfinite(d) || std::fabs(d) >= 9.2e18) return std::nullopt;
  return static_cast<int64_t>(d);
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------

Value f_abs(Interpreter&, const Value& v, CallArgs& a) {
  bind_args("abs", a, {});
  if (v.is_integral()) return v.as_int() < 0 ? negate(v) : Value(v.as_int());
  if (v.is_float()) return Value(std::fabs(v.as_double()));
  fail("bad operand type for abs(): '" + type_name(v) + "'");
}

Value f_attr(Interpreter&, const Value& v, CallArgs& a) {
  Args p = bind_args("attr", a, {"name"});
  if (!p[0]) fail("attr() missing required argument 'name'");
  std::string name = arg_string("attr", *p[0]);
  if (v.is_namespace()) {
    const Value* x = v.namespace_dict().find(name);
    if (x) return *x;
  } else if (auto m = find_method(v, name)) {
    return *m;
  }
  return Value::undefined("'" + type_name(v) + " object' has no attribute '" + name + "'");
}

Value f_batch(Interpreter& in, const Value& v, CallArgs& a) {
  Args p = bind_args("batch", a, {"linecount", "fill_with"});
  if (!p[0]) fail("batch() missing required argument 'linecount'");
  const int64_t n = arg_int("batch", *p[0]);
  std::vector<Value> out, tmp;
  for (const Value& item : in.iterate(v)) {
    if (static_cast<int64_t>(tmp.size()) == n) {
      out.push_back(Value::list(std::move(tmp)));
      tmp.clear();
    }
    tmp.push_back(item);
  }
  if (!tmp.empty()) {
    if (p[1] && !p[1]->is_none())
      while (static_cast<int64_t>(tmp.size()) < n) tmp.push_back(*p[1]);
    out.push_back(Value::list(std::move(tmp)));
  }
  return Value::list(std::move(out));
}

Value f_capitalize(Interpreter&, const Value& v, CallArgs& a) {
  bind_args("capitalize", a, {});
  return Value(py_capitalize(text(v)));
}

Value f_center(Interpreter&, const Value& v, CallArgs& a) {
  Args p = bind_args("center", a, {"width"});
  const int64_t width = p[0] ? arg_int("center", *p[0]) : 80;
  std::string s = text(v);
  const auto len = static_cast<int64_t>(char_count(s));
  if (width <= len) return Value(s);
  if (width > static_cast<int64_t>(kMaxStringBytes)) fail("string result too large");
  const int64_t marg = width - len;
  const int64_t left = marg / 2 + (marg & width & 1);  // CPython's pad()
  return Value(std::string(static_cast<size_t>(left), ' ') + s +
               std::string(static_cast<size_t>(marg - left), ' '));
}

Value f_default(Interpreter&, const Value& v, CallArgs& a) {
  Args p = bind_args("default", a, {"default_value", "boolean"});
  if (v.is_undefined() || (flag(p[1], false) && !truthy(v))) return p[0] ? *p[0] : Value("");
  return v;
}

Value f_dictsort(Interpreter&, const Value& v, CallArgs& a) {
  Args p = bind_args("dictsort", a, {"case_sensitive", "by", "reverse"});
  if (!v.is_dict()) fail("'" + type_name(v) + "' object has no attribute 'items'");
  const bool case_sensitive = flag(p[0], false);
  const std::string by = p[1] ? arg_string("dictsort", *p[1]) : "key";
  if (by != "key" && by != "value") fail("You can only sort by either \"key\" or \"value\"");
  const bool reverse = flag(p[2], false);
  std::vector<std::pair<Value, Value>> entries = v.dict().entries();
  std::stable_sort(entries.begin(), entries.end(), [&](const auto& x, const auto& y) {
    Value kx = fold_case(by == "key" ? x.first : x.second, case_sensitive);
    Value ky = fold_case(by == "key" ? y.first : y.second, case_sensitive);
    return reverse ? less(ky, kx) : less(kx, ky);
  });
  std::vector<Value> out;
  for (auto& [k, val] : entries) out.push_back(Value::tuple({k, val}));
  return Value::list(std::move(out));
}

Value f_escape(Interpreter&, const Value& v, CallArgs& a) {
  bind_args("escape", a, {});
  return Value(html_escape(text(v)));
}

Value f_first(Interpreter& in, const Value& v, CallArgs& a) {
  bind_args("first", a, {});
  if (v.is_string()) {
    std::vector<std::string_view> cs = split_chars(v.str());
    if (!cs.empty()) return Value(std::string(cs[0]));
  } else if (v.is_sequence()) {
    if (!v.items().empty()) return v.items()[0];
  } else {
    std::vector<Value> items = in.iterate(v);
    if (!items.empty()) return items[0];
  }
  return Value::undefined("No first item, sequence was empty.");
}

Value f_last(Interpreter& in, const Value& v, CallArgs& a) {
  bind_args("last", a, {});
  std::vector<Value> items = v.is_sequence() ? v.items() : in.iterate(v);
  if (items.empty()) return Value::undefined("No last item, sequence was empty.");
  return items.back();
}

Value f_float(Interpreter&, const Value& v, CallArgs& a) {
  Args p = bind_args("float", a, {"default"});
  Value dflt = p[0] ? *p[0] : Value(0.0);
  if (v.is_number()) return Value(v.as_double());
  if (v.is_string()) {
    if (auto d = parse_float(v.str())) return Value(*d);
  }
  return dflt;
}

Value f_format(Interpreter&, const Value& v, CallArgs& a) {
  if (!a.positional.empty() && !a.keyword.empty())
    fail("can't handle positional and keyword arguments at the same time");
  if (!a.keyword.empty()) {
    Dict d;
    for (const auto& [k, x] : a.keyword) d.set(Value(k), x);
    return Value(percent_format(text(v), Value::dict(std::move(d))));
  }
  return Value(percent_format(text(v), Value::tuple(a.positional)));
}

Value f_indent(Interpreter&, const Value& v, CallArgs& a) {
  Args p = bind_args("indent", a, {"width", "first", "blank"});
  std::string indention = "    ";
  if (p[0]) {
    if (p[0]->is_string()) {
      indention = p[0]->str();
    } else {
      int64_t w = arg_int("indent", *p[0]);
      if (w > 10000) fail("indent width too large");
      indention = std::string(static_cast<size_t>(std::max<int64_t>(w, 0)), ' ');
    }
  }
  const bool first = flag(p[1], false), blank = flag(p[2], false);
  std::vector<std::string> lines = py_splitlines(text(v) + "\n", false);
  std::string rv;
  if (blank) {
    for (size_t i = 0; i < lines.size(); ++i) {
      if (i) rv += '\n' + indention;
      rv += lines[i];
    }
  } else {
    rv = lines.empty() ? "" : lines[0];
    for (size_t i = 1; i < lines.size(); ++i) {
      rv += '\n';
      if (!lines[i].empty()) rv += indention;
      rv += lines[i];
    }
  }
  if (first) rv = indention + rv;
  return Value(std::move(rv));
}

Value f_int(Interpreter&, const Value& v, CallArgs& a) {
  Args p = bind_args("int", a, {"default", "base"});
  Value dflt = p[0] ? *p[0] : Value(0);
  const int64_t base = p[1] ? arg_int("int", *p[1]) : 10;
  if (v.is_integral()) return Value(v.as_int());
  if (v.is_float()) {
    if (auto i = float_to_int(v.as_double())) return Value(*i);
    return dflt;
  }
  if (v.is_string()) {
    if (auto i = parse_int(v.str(), base)) return Value(*i);
    if (auto d = parse_float(v.str()))  // "42.23"|int is 42
      if (auto i = float_to_int(*d)) return Value(*i);
  }
  return dflt;
}

Value f_items(Interpreter&, const Value& v, CallArgs& a) {
  bind_args("items", a, {});
  if (v.is_undefined()) return Value::list({});
  if (!v.is_dict()) fail("Can only get item pairs from a mapping.");
  std::vector<Value> out;
  for (const auto& [k, x] : v.dict().entries()) out.push_back(Value::tuple({k, x}));
  return Value::list(std::move(out));
}

Value f_join(Interpreter& in, const Value& v, CallArgs& a) {
  Args p = bind_args("join", a, {"d", "attribute"});
  const std::string sep = p[0] ? text(*p[0]) : "";
  std::string out;
  bool first = true;
  for (const Value& item : in.iterate(v)) {
    if (!first) out += sep;
    first = false;
    Value x = (p[1] && !p[1]->is_none()) ? get_attribute_path(in, item, *p[1]) : item;
    out += text(x);
    if (out.size() > kMaxStringBytes) fail("string result too large");
  }
  return Value(std::move(out));
}

Value f_length(Interpreter&, const Value& v, CallArgs& a) {
  bind_args("length", a, {});
  return Value(py_len(v));
}

Value f_list(Interpreter& in, const Value& v, CallArgs& a) {
  bind_args("list", a, {});
  return Value::list(in.iterate(v));
}

Value f_lower(Interpreter&, const Value& v, CallArgs& a) {
  bind_args("lower", a, {});
  return Value(py_lower(text(v)));
}

Value f_upper(Interpreter&, const Value& v, CallArgs& a) {
  bind_args("upper", a, {});
  return Value(py_upper(text(v)));
}

Value f_map(Interpreter& in, const Value& v, CallArgs& a) {
  std::vector<Value> out;
  if (a.positional.empty()) {
    const Value* attribute = nullptr;
    const Value* dflt = nullptr;
    for (const auto& [k, x] : a.keyword) {
      if (k == "attribute") attribute = &x;
      else if (k == "default") dflt = &x;
      else fail("Unexpected keyword argument '" + k + "'");
    }
    if (!attribute) fail("map requires a filter argument");
    for (const Value& item : in.iterate(v)) {
      Value x = get_attribute_path(in, item, *attribute);
      if (dflt && !dflt->is_none() && x.is_undefined()) x = *dflt;
      out.push_back(std::move(x));
    }
    return Value::list(std::move(out));
  }
  const std::string name = arg_string("map", a.positional[0]);
  CallArgs rest;
  rest.positional.assign(a.positional.begin() + 1, a.positional.end());
  rest.keyword = a.keyword;
  for (const Value& item : in.iterate(v)) {
    CallArgs copy = rest;
    out.push_back(in.filter(name, item, copy));
  }
  return Value::list(std::move(out));
}

// select / reject / selectattr / rejectattr (jinja2's select_or_reject).
Value select_or_reject(Interpreter& in, const Value& v, CallArgs& a, bool keep_if, bool by_attr) {
  std::vector<Value> out;
  if (!truthy(v)) return Value::list({});
  size_t off = 0;
  std::optional<Value> attribute;
  if (by_attr) {
    if (a.positional.empty()) fail("Missing parameter for attribute name");
    attribute = a.positional[0];
    off = 1;
  }
  std::optional<std::string> test_name;
  CallArgs test_args;
  if (a.positional.size() > off) {
    test_name = arg_string("select", a.positional[off]);
    test_args.positional.assign(a.positional.begin() + static_cast<long>(off) + 1, a.positional.end());
    test_args.keyword = a.keyword;
  }
  for (const Value& item : in.iterate(v)) {
    Value x = attribute ? get_attribute_path(in, item, *attribute) : item;
    bool result;
    if (test_name) {
      CallArgs copy = test_args;
      result = in.test(*test_name, x, copy);
    } else {
      result = truthy(x);
    }
    if (result == keep_if) out.push_back(item);
  }
  return Value::list(std::move(out));
}

Value f_select(Interpreter& in, const Value& v, CallArgs& a) { return select_or_reject(in, v, a, true, false); }
Value f_reject(Interpreter& in, const Value& v, CallArgs& a) { return select_or_reject(in, v, a, false, false); }
Value f_selectattr(Interpreter& in, const Value& v, CallArgs& a) { return select_or_reject(in, v, a, true, true); }
Value f_rejectattr(Interpreter& in, const Value& v, CallArgs& a) { return select_or_reject(in, v, a, false, true); }

Value min_or_max(Interpreter& in, const Value& v, CallArgs& a, bool want_max) {
  Args p = bind_args(want_max ? "max" : "min", a, {"case_sensitive", "attribute"});
  std::vector<Value> items = in.iterate(v);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  const bool cs = flag(p[0], false);
  size_t best = 0;
  Value best_key = sort_key(in, items[0], p[1], cs, false);
  for (size_t i = 1; i < items.size(); ++i) {
    Value k = sort_key(in, items[i], p[1], cs, false);
    if (want_max ? less(best_key, k) : less(k, best_key)) {
      best = i;
      best_key = k;
    }
  }
  return items[best];
}

Value f_max(Interpreter& in, const Value& v, CallArgs& a) { return min_or_max(in, v, a, true); }
Value f_min(Interpreter& in, const Value& v, CallArgs& a) { return min_or_max(in, v, a, false); }

Value f_replace(Interpreter&, const Value& v, CallArgs& a) {
  Args p = bind_args("replace", a, {"old", "new", "count"});
  if (!p[0] || !p[1]) fail("replace() missing required arguments 'old' and 'new'");
  const int64_t count = (p[2] && !p[2]->is_none()) ? arg_int("replace", *p[2]) : -1;
  std::string out = py_replace(text(v), text(*p[0]), text(*p[1]), count);
  if (out.size() > kMaxStringBytes) fail("string result too large");
  return Value(std::move(out));
}

Value f_reverse(Interpreter& in, const Value& v, CallArgs& a) {
  bind_args("reverse", a, {});
  if (v.is_string()) {
    std::vector<std::string_view> cs = split_chars(v.str());
    std::string out;
    for (size_t i = cs.size(); i-- > 0;) out += cs[i];
    return Value(std::move(out));
  }
  if (!v.is_sequence() && !v.is_dict() && !v.is_undefined()) fail("argument must be iterable");
  std::vector<Value> items = in.iterate(v);
  std::reverse(items.begin(), items.end());
  return Value::list(std::move(items));
}

// Python's round(x, n) for floats: correctly rounded, ties to even (as printf does).
double py_round(double x, int64_t n) {
  if (!std::isfinite(x)) return x;
  if (n >= 0) {
    if (n > 300) return x;
    char buf[512];
    snprintf(buf, sizeof(buf), "%.*f", static_cast<int>(n), x);
    return std::strtod(buf, nullptr);
  }
  double scale = std::pow(10.0, static_cast<double>(-n));
  return std::nearbyint(x / scale) * scale;
}

Value f_round(Interpreter&, const Value& v, CallArgs& a) {
  Args p = bind_args("round", a, {"precision", "method"});
  const int64_t precision = p[0] ? arg_int("round", *p[0]) : 0;
  const std::string method = p[1] ? arg_string("round", *p[1]) : "common";
  if (method != "common" && method != "ceil" && method != "floor")
    fail("method must be common, ceil or floor");
  if (!v.is_number()) fail("type " + type_name(v) + " doesn't define __round__ method");
  if (method == "common") {
    if (v.is_integral() && precision >= 0) return Value(v.as_int());
    return Value(py_round(v.as_double(), precision));
  }
  double scale = std::pow(10.0, static_cast<double>(precision));
  double x = v.as_double() * scale;
  return Value((method == "ceil" ? std::ceil(x) : std::floor(x)) / scale);
}

Value f_safe(Interpreter&, const Value& v, CallArgs& a) {
  bind_args("safe", a, {});
  return Value(text(v));
}

Value f_sort(Interpreter& in, const Value& v, CallArgs& a) {
  Args p = bind_args("sort", a, {"reverse", "case_sensitive", "attribute"});
  const bool reverse = flag(p[0], false), cs = flag(p[1], false);
  std::vector<Value> items = in.iterate(v);
  std::vector<std::pair<Value, Value>> keyed;
  for (const Value& item : items) keyed.emplace_back(sort_key(in, item, p[2], cs, true), item);
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
    return reverse ? less(y.first, x.first) : less(x.first, y.first);
  });
  std::vector<Value> out;
  for (auto& kv : keyed) out.push_back(std::move(kv.second));
  return Value::list(std::move(out));
}

Value f_string(Interpreter&, const Value& v, CallArgs& a) {
  bind_args("string", a, {});
  return Value(text(v));
}

// Markup.striptags(): drop comments and tags, collapse whitespace, unescape entities.
Value f_striptags(Interpreter&, const Value& v, CallArgs& a) {
  bind_args("striptags", a, {});
  std::string s = text(v), no_tags;
  for (size_t i = 0; i < s.size();) {
    if (s.compare(i, 4, "<!--") == 0) {
      size_t end = s.find("-->", i + 4);
      if (end != std::string::npos) {
        i = end + 3;
        continue;
      }
    }
    if (s[i] == '<') {
      size_t end = s.find('>', i + 1);
      if (end != std::string::npos) {
        i = end + 1;
        continue;
      }
    }
    no_tags += s[i++];
  }
  std::string joined;
  for (const std::string& w : py_split(no_tags, std::nullopt, -1)) joined += (joined.empty() ? "" : " ") + w;
  static const std::pair<const char*, const char*> kEntities[] = {
      {"&amp;", "&"}, {"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&#34;", "\""}, {"&#39;", "'"}, {"&apos;", "'"}};
  std::string out;
  for (size_t i = 0; i < joined.size();) {
    bool replaced = false;
    for (auto [entity, ch] : kEntities) {
      size_t n = strlen(entity);
      if (joined.compare(i, n, entity) == 0) {
        out += ch;
        i += n;
        replaced = true;
        break;
      }
    }
    if (!replaced) out += joined[i++];
  }
  return Value(std::move(out));
}

Value f_sum(Interpreter& in, const Value& v, CallArgs& a) {
  Args p = bind_args("sum", a, {"attribute", "start"});
  Value total = p[1] ? *p[1] : Value(0);
  for (const Value& item : in.iterate(v)) {
    Value x = (p[0] && !p[0]->is_none()) ? get_attribute_path(in, item, *p[0]) : item;
    total = binary_op("+", total, x);
  }
  return total;
}

// jinja2's title filter: words start after runs of whitespace, -, (, {, [ or <.
Value f_title(Interpreter&, const Value& v, CallArgs& a) {
  bind_args("title", a, {});
  std::string s = text(v), out;
  bool word_start = true;
  for (size_t i = 0; i < s.size();) {
    utf8::Char c = utf8::decode(s, i);
    std::string_view ch = std::string_view(s).substr(i, c.len);
    i += c.len;
    bool separator = c.cp != utf8::kInvalid &&
                     (is_py_space(c.cp) || c.cp == '-' || c.cp == '(' || c.cp == '{' ||
                      c.cp == '[' || c.cp == '<');
    if (separator) {
      out += ch;
      word_start = true;
    } else {
      out += word_start ? py_upper(ch) : py_lower(ch);
      word_start = false;
    }
  }
  return Value(std::move(out));
}

// transformers' tojson: json.dumps(x, ensure_ascii=False, indent, separators, sort_keys).
Value f_tojson(Interpreter&, const Value& v, CallArgs& a) {
  Args p = bind_args("tojson", a, {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonOptions o;
  o.ensure_ascii = flag(p[0], false);
  if (p[1] && !p[1]->is_none()) {
    if (p[1]->is_string()) {
      o.indent = p[1]->str();
    } else {
      int64_t n = arg_int("tojson", *p[1]);
      o.indent = std::string(static_cast<size_t>(std::clamp<int64_t>(n, 0, 1000)), ' ');
    }
  }
  if (p[2] && !p[2]->is_none()) {
    if (!p[2]->is_sequence() || p[2]->items().size() != 2 || !p[2]->items()[0].is_string() ||
        !p[2]->items()[1].is_string())
      fail("separators must be a pair of strings");
    o.item_separator = p[2]->items()[0].str();
    o.key_separator = p[2]->items()[1].str();
  }
  o.sort_keys = flag(p[3], false);
  return Value(to_json(v, o));
}

Value f_trim(Interpreter&, const Value& v, CallArgs& a) {
  Args p = bind_args("trim", a, {"chars"});
  std::optional<std::string> chars;
  if (p[0] && !p[0]->is_none()) chars = arg_string("trim", *p[0]);
  return Value(std::string(py_strip(text(v), chars, true, true)));
}

Value f_truncate(Interpreter&, const Value& v, CallArgs& a) {
  Args p = bind_args("truncate", a, {"length", "killwords", "end", "leeway"});
  const int64_t length = p[0] ? arg_int("truncate", *p[0]) : 255;
  const bool killwords = flag(p[1], false);
  const std::string end = p[2] ? arg_string("truncate", *p[2]) : "...";
  const int64_t leeway = (p[3] && !p[3]->is_none()) ? arg_int("truncate", *p[3]) : 5;
  const auto end_len = static_cast<int64_t>(char_count(end));
  if (length < end_len) fail("expected length >= " + std::to_string(end_len) + ", got " + std::to_string(length));
  if (leeway < 0) fail("expected leeway >= 0, got " + std::to_string(leeway));
  std::string s = text(v);
  std::vector<std::string_view> cs = split_chars(s);
  if (static_cast<int64_t>(cs.size()) <= length + leeway) return Value(s);
  std::string head;
  for (int64_t i = 0; i < length - end_len; ++i) head += cs[static_cast<size_t>(i)];
  if (killwords) return Value(head + end);
  return Value(py_rsplit(head, std::string(" "), 1)[0] + end);
}

Value f_unique(Interpreter& in, const Value& v, CallArgs& a) {
  Args p = bind_args("unique", a, {"case_sensitive", "attribute"});
  const bool cs = flag(p[0], false);
  std::vector<Value> out, seen;
  for (const Value& item : in.iterate(v)) {
    Value key = sort_key(in, item, p[1], cs, false);
    bool dup = false;
    for (const Value& s : seen)
      if (equal(s, key)) {
        dup = true;
        break;
      }
    if (dup) continue;
    seen.push_back(key);
    out.push_back(item);
  }
  return Value::list(std::move(out));
}

// Counts runs of \w (letters, digits, underscore).
Value f_wordcount(Interpreter&, const Value& v, CallArgs& a) {
  bind_args("wordcount", a, {});
  std::string s = text(v);
  int64_t words = 0;
  bool in_word = false;
  for (size_t i = 0; i < s.size();) {
    utf8::Char c = utf8::decode(s, i);
    i += c.len;
    bool w = c.cp == '_' || (c.cp != utf8::kInvalid && (unicode_class(c.cp) == UnicodeClass::kLetter ||
                                                         unicode_class(c.cp) == UnicodeClass::kNumber));
    if (w && !in_word) ++words;
    in_word = w;
  }
  return Value(words);
}

const std::unordered_map<std::string_view, FilterFn>& filter_table() {
  static const std::unordered_map<std::string_view, FilterFn> table = {
      {"abs", f_abs},           {"attr", f_attr},         {"batch", f_batch},
      {"capitalize", f_capitalize}, {"center", f_center}, {"count", f_length},
      {"d", f_default},         {"default", f_default},   {"dictsort", f_dictsort},
      {"e", f_escape},          {"escape", f_escape},     {"first", f_first},
      {"float", f_float},       {"forceescape", f_escape}, {"format", f_format},
      {"indent", f_indent},     {"int", f_int},           {"items", f_items},
      {"join", f_join},         {"last", f_last},         {"length", f_length},
      {"list", f_list},         {"lower", f_lower},       {"map", f_map},
      {"max", f_max},           {"min", f_min},           {"reject", f_reject},
      {"rejectattr", f_rejectattr}, {"replace", f_replace}, {"reverse", f_reverse},
      {"round", f_round},       {"safe", f_safe},         {"select", f_select},
      {"selectattr", f_selectattr}, {"sort", f_sort},     {"string", f_string},
      {"striptags", f_striptags}, {"sum", f_sum},         {"title", f_title},
      {"tojson", f_tojson},     {"trim", f_trim},         {"truncate", f_truncate},
      {"unique", f_unique},     {"upper", f_upper},       {"wordcount", f_wordcount},
  };
  return table;
}

}  // namespace

FilterFn find_filter(std::string_view name) {
  const auto& table = filter_table();
  auto it = table.find(name);
  return it == table.end() ? nullptr : it->second;
}

}  // namespace pagoda::jinja

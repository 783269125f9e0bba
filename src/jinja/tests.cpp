// jinja2's builtin tests (tests.py in jinja2 3.1): `x is defined`, `n is odd`, ...
#include <unordered_map>

#include "jinja/builtins.h"
#include "jinja/eval.h"
#include "jinja/ops.h"
#include "jinja/pystr.h"

namespace pagoda::jinja {
namespace {

// The one argument of a comparison test (`x is eq 3`, `x is divisibleby(3)`).
Value operand(std::string_view test, CallArgs& a) {
  auto p = bind_args(test, a, {"other"});
  if (!p[0]) fail(std::string(test) + "() missing required argument");
  return *p[0];
}

void no_args(std::string_view test, CallArgs& a) { bind_args(test, a, {}); }

bool t_defined(Interpreter&, const Value& v, CallArgs& a) { no_args("defined", a); return !v.is_undefined(); }
bool t_undefined(Interpreter&, const Value& v, CallArgs& a) { no_args("undefined", a); return v.is_undefined(); }
bool t_none(Interpreter&, const Value& v, CallArgs& a) { no_args("none", a); return v.is_none(); }
bool t_boolean(Interpreter&, const Value& v, CallArgs& a) { no_args("boolean", a); return v.is_bool(); }
bool t_true(Interpreter&, const Value& v, CallArgs& a) { no_args("true", a); return v.is_bool() && v.as_bool(); }
bool t_false(Interpreter&, const Value& v, CallArgs& a) { no_args("false", a); return v.is_bool() && !v.as_bool(); }
bool t_integer(Interpreter&, const Value& v, CallArgs& a) { no_args("integer", a); return v.is_int(); }
bool t_float(Interpreter&, const Value& v, CallArgs& a) { no_args("float", a); return v.is_float(); }
bool t_number(Interpreter&, const Value& v, CallArgs& a) { no_args("number", a); return v.is_number(); }
bool t_string(Interpreter&, const Value& v, CallArgs& a) { no_args("string", a); return v.is_string(); }
bool t_mapping(Interpreter&, const Value& v, CallArgs& a) { no_args("mapping", a); return v.is_dict(); }
// jinja2's Undefined defines __call__ (to fail), so Python's callable() accepts it.
bool t_callable(Interpreter&, const Value& v, CallArgs& a) {
  no_args("callable", a);
  return v.is_callable() || v.is_undefined();
}
bool t_escaped(Interpreter&, const Value&, CallArgs& a) { no_args("escaped", a); return false; }

// Python can iterate str, list, tuple, dict and jinja2's Undefined.
bool t_iterable(Interpreter&, const Value& v, CallArgs& a) {
  no_args("iterable", a);
  return v.is_string() || v.is_sequence() || v.is_dict() || v.is_undefined();
}

// len() and __getitem__: str, list, tuple, dict and Undefined.
bool t_sequence(Interpreter&, const Value& v, CallArgs& a) {
  no_args("sequence", a);
  return v.is_string() || v.is_sequence() || v.is_dict() || v.is_undefined();
}

bool t_odd(Interpreter&, const Value& v, CallArgs& a) {
  no_args("odd", a);
  return equal(binary_op("%", v, Value(2)), Value(1));
}

bool t_even(Interpreter&, const Value& v, CallArgs& a) {
  no_args("even", a);
  return equal(binary_op("%", v, Value(2)), Value(0));
}

bool t_divisibleby(Interpreter&, const Value& v, CallArgs& a) {
  return equal(binary_op("%", v, operand("divisibleby", a)), Value(0));
}

bool t_lower(Interpreter&, const Value& v, CallArgs& a) { no_args("lower", a); return py_islower(to_str(v)); }
bool t_upper(Interpreter&, const Value& v, CallArgs& a) { no_args("upper", a); return py_isupper(to_str(v)); }

// `is` in Python: identity. Values here have no identity of their own except shared
// containers, so scalars compare by type and value (what CPython's caching gives
// for None, booleans, small ints and interned strings).
bool t_sameas(Interpreter&, const Value& v, CallArgs& a) {
  Value other = operand("sameas", a);
  if (v.kind() != other.kind()) return false;
  if (v.identity() || other.identity()) return v.identity() == other.identity();
  return equal(v, other);
}

bool t_in(Interpreter&, const Value& v, CallArgs& a) { return contains(operand("in", a), v); }
bool t_eq(Interpreter&, const Value& v, CallArgs& a) { return compare_op("==", v, operand("eq", a)); }
bool t_ne(Interpreter&, const Value& v, CallArgs& a) { return compare_op("!=", v, operand("ne", a)); }
bool t_lt(Interpreter&, const Value& v, CallArgs& a) { return compare_op("<", v, operand("lt", a)); }
bool t_le(Interpreter&, const Value& v, CallArgs& a) { return compare_op("<=", v, operand("le", a)); }
bool t_gt(Interpreter&, const Value& v, CallArgs& a) { return compare_op(">", v, operand("gt", a)); }
bool t_ge(Interpreter&, const Value& v, CallArgs& a) { return compare_op(">=", v, operand("ge", a)); }

bool t_filter(Interpreter&, const Value& v, CallArgs& a) {
  no_args("filter", a);
  return v.is_string() && find_filter(v.str()) != nullptr;
}

bool t_test(Interpreter&, const Value& v, CallArgs& a) {
  no_args("test", a);
  return v.is_string() && find_test(v.str()) != nullptr;
}

const std::unordered_map<std::string_view, TestFn>& test_table() {
  static const std::unordered_map<std::string_view, TestFn> table = {
      {"defined", t_defined},   {"undefined", t_undefined}, {"none", t_none},
      {"boolean", t_boolean},   {"true", t_true},           {"false", t_false},
      {"integer", t_integer},   {"float", t_float},         {"number", t_number},
      {"string", t_string},     {"mapping", t_mapping},     {"callable", t_callable},
      {"escaped", t_escaped},   {"iterable", t_iterable},   {"sequence", t_sequence},
      {"odd", t_odd},           {"even", t_even},           {"divisibleby", t_divisibleby},
      {"lower", t_lower},       {"upper", t_upper},         {"sameas", t_sameas},
      {"in", t_in},             {"eq", t_eq},               {"equalto", t_eq},
      {"==", t_eq},             {"ne", t_ne},               {"!=", t_ne},
      {"lt", t_lt},             {"lessthan", t_lt},         {"<", t_lt},
      {"le", t_le},             {"<=", t_le},               {"gt", t_gt},
      {"greaterthan", t_gt},    {">", t_gt},                {"ge", t_ge},
      {">=", t_ge},             {"filter", t_filter},       {"test", t_test},
  };
  return table;
}

}  // namespace

TestFn find_test(std::string_view name) {
  const auto& table = test_table();
  auto it = table.find(name);
  return it == table.end() ? nullptr : it->second;
}

}  // namespace pagoda::jinja

#include "jinja/ops.h"

#include <cmath>

#include "jinja/format.h"
#include "jinja/pystr.h"

namespace pagoda::jinja {

void fail_undefined(const Value& v) {
  const std::string& hint = v.undefined_hint();
  fail(hint.empty() ? std::string("value is undefined") : hint);
}

namespace {

[[noreturn]] void unsupported(const std::string& op, const Value& a, const Value& b) {
  fail("unsupported operand type(s) for " + op + ": '" + type_name(a) + "' and '" +
       type_name(b) + "'");
}

[[noreturn]] void overflow() { fail("integer overflow (values are limited to 64 bits)"); }

// Fails when a __builtin_*_overflow check reported an overflow.
void check(bool overflowed) {
  if (overflowed) overflow();
}

// Python's float modulo and floor division (Objects/floatobject.c: float_divmod).
void float_divmod(double vx, double wx, double* floordiv, double* mod) {
  double m = std::fmod(vx, wx);
  double div = (vx - m) / wx;
  if (m != 0.0) {
    if ((wx < 0) != (m < 0)) {
      m += wx;
      div -= 1.0;
    }
  } else {
    m = std::copysign(0.0, wx);
  }
  double fd;
  if (div != 0.0) {
    fd = std::floor(div);
    if (div - fd > 0.5) fd += 1.0;
  } else {
    fd = std::copysign(0.0, vx / wx);
  }
  *floordiv = fd;
  *mod = m;
}

Value int_pow(int64_t base, int64_t exp) {
  int64_t result = 1;
  while (exp > 0) {
    if (exp & 1) check(__builtin_mul_overflow(result, base, &result));
    exp >>= 1;
    if (exp > 0) check(__builtin_mul_overflow(base, base, &base));
  }
  return Value(result);
}

// Repeats a str, list or tuple `count` times (count <= 0 gives an empty one).
Value repeat(const Value& seq, int64_t count) {
  if (count < 0) count = 0;
  if (seq.is_string()) {
    const std::string& s = seq.str();
    if (!s.empty() && static_cast<uint64_t>(count) > kMaxStringBytes / s.size())
      fail("string result too large");
    std::string out;
    out.reserve(s.size() * static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) out += s;
    return Value(std::move(out));
  }
  const auto& items = seq.items();
  if (!items.empty() && static_cast<uint64_t>(count) > (kMaxStringBytes / 16) / items.size())
    fail("list result too large");
  std::vector<Value> out;
  out.reserve(items.size() * static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) out.insert(out.end(), items.begin(), items.end());
  return seq.is_tuple() ? Value::tuple(std::move(out)) : Value::list(std::move(out));
}

Value add(const Value& a, const Value& b) {
  if (a.is_integral() && b.is_integral()) {
    int64_t r = 0;
    check(__builtin_add_overflow(a.as_int(), b.as_int(), &r));
    return Value(r);
  }
  if (a.is_number() && b.is_number()) return Value(a.as_double() + b.as_double());
  if (a.is_string() && b.is_string()) {
    if (a.str().size() + b.str().size() > kMaxStringBytes) fail("string result too large");
    return Value(a.str() + b.str());
  }
  if ((a.is_list() && b.is_list()) || (a.is_tuple() && b.is_tuple())) {
    std::vector<Value> items = a.items();
    items.insert(items.end(), b.items().begin(), b.items().end());
    return a.is_list() ? Value::list(std::move(items)) : Value::tuple(std::move(items));
  }
  if (a.is_string() || a.is_list() || a.is_tuple())
    fail("can only concatenate " + type_name(a) + " (not \"" + type_name(b) + "\") to " +
         type_name(a));
  unsupported("+", a, b);
}

Value multiply(const Value& a, const Value& b) {
  if (a.is_integral() && b.is_integral()) {
    int64_t r = 0;
    check(__builtin_mul_overflow(a.as_int(), b.as_int(), &r));
    return Value(r);
  }
  if (a.is_number() && b.is_number()) return Value(a.as_double() * b.as_double());
  if ((a.is_string() || a.is_sequence()) && b.is_integral()) return repeat(a, b.as_int());
  if ((b.is_string() || b.is_sequence()) && a.is_integral()) return repeat(b, a.as_int());
  if (a.is_string() || a.is_sequence() || b.is_string() || b.is_sequence())
    fail("can't multiply sequence by non-int of type '" +
         type_name(a.is_number() ? a : b) + "'");
  unsupported("*", a, b);
}

Value divide(const Value& a, const Value& b, const std::string& op) {
  if (!a.is_number() || !b.is_number()) unsupported(op, a, b);
  if (op == "/") {
    if (b.as_double() == 0.0) fail("division by zero");
    return Value(a.as_double() / b.as_double());
  }
  if (a.is_integral() && b.is_integral()) {
    int64_t x = a.as_int(), y = b.as_int();
    if (y == 0) fail("integer division or modulo by zero");
    if (x == INT64_MIN && y == -1) overflow();
    int64_t q = x / y, r = x % y;
    if (r != 0 && ((r < 0) != (y < 0))) {
      q -= 1;
      r += y;
    }
    return Value(op == "//" ? q : r);
  }
  if (b.as_double() == 0.0) fail(op == "//" ? "float floor division by zero" : "float modulo");
  double fd, m;
  float_divmod(a.as_double(), b.as_double(), &fd, &m);
  return Value(op == "//" ? fd : m);
}

Value power(const Value& a, const Value& b) {
  if (!a.is_number() || !b.is_number()) unsupported("** or pow()", a, b);
  if (a.is_integral() && b.is_integral() && b.as_int() >= 0) return int_pow(a.as_int(), b.as_int());
  double x = a.as_double(), y = b.as_double();
  if (x == 0.0 && y < 0) fail("0.0 cannot be raised to a negative power");
  if (x < 0 && y != std::floor(y)) fail("complex numbers are not supported");
  double r = std::pow(x, y);
  if (std::isinf(r) && std::isfinite(x) && std::isfinite(y)) fail("Numerical result out of range");
  return Value(r);
}

}  // namespace

Value binary_op(const std::string& op, const Value& a, const Value& b) {
  // `'%s' % x` formats even an undefined x (as ""), so this comes before the check.
  if (op == "%" && a.is_string()) return Value(percent_format(a.str(), b));
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  if (op == "+") return add(a, b);
  if (op == "-") {
    if (a.is_integral() && b.is_integral()) {
      int64_t r = 0;
      check(__builtin_sub_overflow(a.as_int(), b.as_int(), &r));
      return Value(r);
    }
    if (a.is_number() && b.is_number()) return Value(a.as_double() - b.as_double());
    unsupported("-", a, b);
  }
  if (op == "*") return multiply(a, b);
  if (op == "/" || op == "//" || op == "%") return divide(a, b, op);
  if (op == "**") return power(a, b);
  fail("unknown operator " + op);
}

Value negate(const Value& v) {
  if (v.is_undefined()) fail_undefined(v);
  if (v.is_integral()) {
    if (v.as_int() == INT64_MIN) overflow();
    return Value(-v.as_int());
  }
  if (v.is_float()) return Value(-v.as_double());
  fail("bad operand type for unary -: '" + type_name(v) + "'");
}

Value unary_plus(const Value& v) {
  if (v.is_undefined()) fail_undefined(v);
  if (v.is_integral()) return Value(v.as_int());
  if (v.is_float()) return v;
  fail("bad operand type for unary +: '" + type_name(v) + "'");
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::kString:
      if (!item.is_string())
        fail("'in <string>' requires string as left operand, not " + type_name(item));
      return container.str().find(item.str()) != std::string::npos;
    case Value::Kind::kList:
    case Value::Kind::kTuple:
      for (const Value& x : container.items())
        if (equal(x, item)) return true;
      return false;
    case Value::Kind::kDict: return container.dict().find(item) != nullptr;
    case Value::Kind::kUndefined: return false;  // iterating an Undefined yields nothing
    default: fail("argument of type '" + type_name(container) + "' is not iterable");
  }
}

bool compare_op(const std::string& op, const Value& a, const Value& b) {
  if (op == "==") return equal(a, b);
  if (op == "!=") return !equal(a, b);
  if (op == "in") return contains(b, a);
  if (op == "notin") return !contains(b, a);
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  if (op == "<") return less(a, b);
  if (op == ">") return less(b, a);
  if (op == "<=") return less(a, b) || equal(a, b);
  if (op == ">=") return less(b, a) || equal(a, b);
  fail("unknown comparison " + op);
}

Value slice(const Value& obj, const Value& start_v, const Value& stop_v, const Value& step_v) {
  if (obj.is_undefined()) fail_undefined(obj);
  if (!obj.is_string() && !obj.is_sequence()) return Value::undefined("object is not sliceable");
  auto bound = [](const Value& v, bool* ok) -> std::optional<int64_t> {
    if (v.is_none()) return std::nullopt;  // omitted, or an explicit None
    if (!v.is_integral()) {  // includes undefined: a TypeError in Python
      *ok = false;
      return std::nullopt;
    }
    return v.as_int();
  };
  bool ok = true;
  std::optional<int64_t> start = bound(start_v, &ok), stop = bound(stop_v, &ok),
                         step_opt = bound(step_v, &ok);
  if (!ok) return Value::undefined("slice indices must be integers or None");
  const int64_t step = step_opt.value_or(1);
  if (step == 0) fail("slice step cannot be zero");

  std::vector<std::string_view> chars;
  if (obj.is_string()) chars = split_chars(obj.str());
  const int64_t len = obj.is_string() ? static_cast<int64_t>(chars.size())
                                      : static_cast<int64_t>(obj.items().size());
  // CPython's PySlice_AdjustIndices.
  auto adjust = [&](std::optional<int64_t> v, int64_t dflt) {
    if (!v) return dflt;
    int64_t x = *v;
    if (x < 0) {
      x += len;
      if (x < 0) x = step < 0 ? -1 : 0;
    } else if (x >= len) {
      x = step < 0 ? len - 1 : len;
    }
    return x;
  };
  int64_t b = adjust(start, step < 0 ? len - 1 : 0);
  int64_t e = adjust(stop, step < 0 ? -1 : len);
  std::vector<int64_t> picks;
  for (int64_t i = b; step > 0 ? i < e : i > e; i += step) picks.push_back(i);
  if (obj.is_string()) {
    std::string out;
    for (int64_t i : picks) out += chars[static_cast<size_t>(i)];
    return Value(std::move(out));
  }
  std::vector<Value> out;
  out.reserve(picks.size());
  for (int64_t i : picks) out.push_back(obj.items()[static_cast<size_t>(i)]);
  return obj.is_tuple() ? Value::tuple(std::move(out)) : Value::list(std::move(out));
}

}  // namespace pagoda::jinja

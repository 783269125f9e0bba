// Python's operators on Jinja values: arithmetic (+ - * / // % **) with Python's
// rules (int / int is a float, // and % floor toward negative infinity, str * int
// repeats, str % args formats), comparison, membership (`in`), slicing and unary
// signs. Integers are 64-bit; a result that would need Python's big integers fails.
#pragma once

#include <optional>
#include <string>

#include "jinja/value.h"

namespace pagoda::jinja {

// `op` is one of + - * / // % **.
Value binary_op(const std::string& op, const Value& a, const Value& b);
Value negate(const Value& v);
Value unary_plus(const Value& v);

// `op` is one of == != < <= > >= in notin.
bool compare_op(const std::string& op, const Value& a, const Value& b);

// Python's `item in container`.
bool contains(const Value& container, const Value& item);

// obj[start:stop:step] on a str, list or tuple; an omitted bound is None. Undefined
// for other objects or bounds that are not integers (as jinja2's getitem does after
// Python's TypeError).
Value slice(const Value& obj, const Value& start, const Value& stop, const Value& step);

// Fails with the undefined value's own message (what jinja2 raises on use).
[[noreturn]] void fail_undefined(const Value& v);

}  // namespace pagoda::jinja

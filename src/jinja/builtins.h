// The names a Jinja template can use without defining them: filters (`x|trim`),
// tests (`x is defined`), globals (range, namespace, dict, joiner, and the two
// transformers adds for chat templates, raise_exception and strftime_now) and the
// Python methods of str, dict and list values ('a b'.split(), d.items()). Each
// follows the jinja2 3.1 / Python 3 function of the same name; what they return as a
// lazy generator in Python (map, select, reverse, ...) they return here as a list.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "jinja/value.h"

namespace pagoda::jinja {

class Interpreter;

using FilterFn = Value (*)(Interpreter&, const Value&, CallArgs&);
using TestFn = bool (*)(Interpreter&, const Value&, CallArgs&);

// nullptr when there is no such filter / test.
FilterFn find_filter(std::string_view name);
TestFn find_test(std::string_view name);

// The bound method `obj.name` of a str, dict, list or tuple; an undefined value that
// fails when called for the methods that would modify a value (list.append, ...),
// which jinja2's immutable sandbox refuses; nullopt when `name` is not a method.
std::optional<Value> find_method(const Value& obj, const std::string& name);

// The global functions of the environment transformers renders chat templates in.
Dict make_globals();

// Binds a builtin's arguments to its parameter names the way Python does: positional
// arguments first, then keywords by name. Fails on too many positional arguments, an
// unknown keyword or a parameter given twice. Absent parameters are nullopt.
std::vector<std::optional<Value>> bind_args(std::string_view function, const CallArgs& args,
                                            std::initializer_list<std::string_view> params);

// The string arguments of builtins: Python would fail on a non-str, so do we.
std::string arg_string(std::string_view function, const Value& v);
int64_t arg_int(std::string_view function, const Value& v);

// jinja2's attribute getter for filters taking attribute="a.b.0": each dot-separated
// part is looked up with getitem (digits as integer indices).
Value get_attribute_path(Interpreter& interp, const Value& item, const Value& path);

}  // namespace pagoda::jinja

// The dynamic values of the Jinja template engine (jinja_*.h), modelled on the Python
// objects jinja2 works with when it renders a Hugging Face chat template: undefined,
// None, bool, int, float, str, list, tuple, dict (insertion-ordered, like Python's),
// namespace and callables (filters, methods, macros). Strings are UTF-8 bytes; lists,
// tuples and dicts are shared and immutable once built (the sandbox jinja2 runs chat
// templates in forbids mutating them), except a namespace, whose attributes `{% set
// ns.x = ... %}` assigns. Copying a Value is cheap (a tag and a shared pointer).
//
// Errors inside the engine are thrown as jinja::Error and turned into a Status at the
// public boundary (chat_template.h); nothing here lets an exception escape the engine.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

namespace pagoda::jinja {

// Thrown by the lexer, parser and interpreter; caught where a Status is returned.
struct Error {
  std::string message;
  int line = 0;  // 0 while unknown; the interpreter fills in the current line
};
[[noreturn]] void fail(std::string message);

class Value;
class Dict;
class Interpreter;

// Arguments of a call: positional, then keyword (in call order).
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

// A function the template can call: a global (range, namespace), a bound method
// ('a b'.split), a macro, loop.cycle, ... `self_repr` is what str() shows for it.
struct Callable {
  std::string self_repr;
  std::function<Value(Interpreter&, CallArgs&)> fn;
};

// Immutable sequence storage; `depth` is the nesting depth of containers inside it
// (1 for a flat list), kept so that values nest at most kMaxDepth deep and every
// recursive walk over them (repr, equality, destruction) stays bounded.
struct ListData {
  std::vector<Value> items;
  uint32_t depth = 1;
};

inline constexpr uint32_t kMaxDepth = 200;
// No string the engine builds (output, concatenation, repr, JSON) may exceed this.
inline constexpr size_t kMaxStringBytes = size_t{64} << 20;

class Value {
 public:
  enum class Kind : uint8_t {
    kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kTuple, kDict, kNamespace,
    kCallable,
  };

  Value() = default;  // undefined, with no hint
  Value(bool b) : kind_(Kind::kBool), data_(b) {}                        // NOLINT
  Value(int v) : kind_(Kind::kInt), data_(int64_t{v}) {}                  // NOLINT
  Value(int64_t v) : kind_(Kind::kInt), data_(v) {}                       // NOLINT
  Value(double v) : kind_(Kind::kFloat), data_(v) {}                      // NOLINT
  Value(std::string s);                                                   // NOLINT
  Value(std::string_view s) : Value(std::string(s)) {}                    // NOLINT
  Value(const char* s) : Value(std::string(s)) {}                         // NOLINT

  // An undefined value remembers why it is undefined ("'x' is undefined"), which is
  // the message when a template then uses it in a way that needs a value.
  static Value undefined(std::string hint);
  static Value none();
  static Value list(std::vector<Value> items);
  static Value tuple(std::vector<Value> items);
  static Value dict(Dict d);
  static Value make_namespace(Dict d);
  static Value callable(std::string self_repr, std::function<Value(Interpreter&, CallArgs&)> fn);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_tuple() const { return kind_ == Kind::kTuple; }
  bool is_sequence() const { return kind_ == Kind::kList || kind_ == Kind::kTuple; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_namespace() const { return kind_ == Kind::kNamespace; }
  bool is_callable() const { return kind_ == Kind::kCallable; }
  // Python's int includes bool; arithmetic treats True as 1.
  bool is_integral() const { return kind_ == Kind::kInt || kind_ == Kind::kBool; }
  bool is_number() const { return is_integral() || kind_ == Kind::kFloat; }

  bool as_bool() const { return std::get<bool>(data_); }
  int64_t as_int() const;  // int or bool
  double as_double() const;  // int, bool or float
  const std::string& str() const { return *std::get<StrPtr>(data_); }
  const std::vector<Value>& items() const { return std::get<ListPtr>(data_)->items; }
  const Dict& dict() const { return *std::get<DictPtr>(data_); }
  Dict& namespace_dict() const { return *std::get<DictPtr>(data_); }
  const Callable& callable() const { return *std::get<CallablePtr>(data_); }
  const std::string& undefined_hint() const;

  // Nesting depth of containers (0 for scalars).
  uint32_t depth() const;
  // Identity of the shared container, for Python's `is` shortcut in comparisons.
  const void* identity() const;

 private:
  using StrPtr = std::shared_ptr<const std::string>;
  using ListPtr = std::shared_ptr<const ListData>;
  using DictPtr = std::shared_ptr<Dict>;
  using CallablePtr = std::shared_ptr<const Callable>;

  Kind kind_ = Kind::kUndefined;
  std::variant<std::monostate, bool, int64_t, double, StrPtr, ListPtr, DictPtr, CallablePtr>
      data_;
};

// A Python dict: keys in insertion order, a key set again keeps its place (and its
// original key object, so {1: 'a', true: 'b'} is {1: 'b'} as in Python). Lookups
// search the entries, which is fastest for the few keys a message or loop variable
// has; past kIndexAbove string keys a hash index takes over. Keys other than strings
// (ints, None, tuples) are always searched: templates build few of them.
class Dict {
 public:
  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  const Value* find(const std::string& key) const { return find(std::string_view(key)); }
  const Value* find(const char* key) const { return find(std::string_view(key)); }
  void set(Value key, Value value);
  size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  const std::vector<std::pair<Value, Value>>& entries() const { return entries_; }
  uint32_t depth() const { return depth_; }
  void clear();

 private:
  static constexpr size_t kIndexAbove = 16;
  static constexpr size_t kNotFound = SIZE_MAX;
  size_t index_of(std::string_view key) const;  // of a string key, or kNotFound

  std::vector<std::pair<Value, Value>> entries_;
  std::unordered_map<std::string, size_t> string_index_;  // empty until kIndexAbove keys
  uint32_t depth_ = 1;
};

// Python truthiness: empty strings and containers, 0, None and undefined are false.
bool truthy(const Value& v);

// Python ==, with 1 == 1.0 == True and element-wise containers. Never fails.
bool equal(const Value& a, const Value& b);

// Python <, for numbers, strings (by code point, which UTF-8 byte order preserves) and
// sequences; anything else fails like Python's TypeError.
bool less(const Value& a, const Value& b);

// Python's type name, as error messages quote it ('int', 'str', 'NoneType', ...).
std::string type_name(const Value& v);

// str(v) and repr(v) as Python prints them; undefined is "" for str() (jinja2's
// default Undefined) and "Undefined" inside a container's repr.
std::string to_str(const Value& v);
std::string to_repr(const Value& v);

// Python's repr() of a float: the shortest digits that round-trip, in fixed notation
// for exponents -4..15 and scientific otherwise ('1e+16', '1.5e-05', '3.0', 'inf').
std::string float_repr(double d);

// A per-render allowance of work for the recursive value walks (repr, equality,
// ordering, JSON), so a template that builds a deeply shared structure cannot make a
// render run for ever. Set by the interpreter for the duration of a render.
class WorkBudget {
 public:
  explicit WorkBudget(int64_t steps);
  ~WorkBudget();
  WorkBudget(const WorkBudget&) = delete;
  WorkBudget& operator=(const WorkBudget&) = delete;
  // Charges one step to the active budget; fails when it is spent.
  static void charge(int64_t steps = 1);

 private:
  int64_t left_;
  WorkBudget* previous_;
};

}  // namespace pagoda::jinja

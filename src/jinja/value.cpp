#include "jinja/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "jinja/pystr.h"

namespace pagoda::jinja {

void fail(std::string message) { throw Error{std::move(message), 0}; }

Value::Value(std::string s)
    : kind_(Kind::kString), data_(std::make_shared<const std::string>(std::move(s))) {}

Value Value::undefined(std::string hint) {
  Value v;
  v.data_ = std::make_shared<const std::string>(std::move(hint));
  return v;
}

Value Value::none() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}

static std::shared_ptr<const ListData> make_list_data(std::vector<Value> items) {
  auto data = std::make_shared<ListData>();
  uint32_t depth = 0;
  for (const Value& item : items) depth = std::max(depth, item.depth());
  data->depth = depth + 1;
  if (data->depth > kMaxDepth) fail("values nest too deeply");
  data->items = std::move(items);
  return data;
}

Value Value::list(std::vector<Value> items) {
  Value v;
  v.kind_ = Kind::kList;
  v.data_ = make_list_data(std::move(items));
  return v;
}

Value Value::tuple(std::vector<Value> items) {
  Value v;
  v.kind_ = Kind::kTuple;
  v.data_ = make_list_data(std::move(items));
  return v;
}

Value Value::dict(Dict d) {
  Value v;
  v.kind_ = Kind::kDict;
  v.data_ = std::make_shared<Dict>(std::move(d));
  return v;
}

Value Value::make_namespace(Dict d) {
  Value v;
  v.kind_ = Kind::kNamespace;
  v.data_ = std::make_shared<Dict>(std::move(d));
  return v;
}

Value Value::callable(std::string self_repr, std::function<Value(Interpreter&, CallArgs&)> fn) {
  Value v;
  v.kind_ = Kind::kCallable;
  v.data_ = std::make_shared<const Callable>(Callable{std::move(self_repr), std::move(fn)});
  return v;
}

int64_t Value::as_int() const {
  return kind_ == Kind::kBool ? int64_t{std::get<bool>(data_)} : std::get<int64_t>(data_);
}

double Value::as_double() const {
  if (kind_ == Kind::kFloat) return std::get<double>(data_);
  return static_cast<double>(as_int());
}

const std::string& Value::undefined_hint() const {
  static const std::string kEmpty;
  if (auto* p = std::get_if<StrPtr>(&data_)) return **p;
  return kEmpty;
}

uint32_t Value::depth() const {
  switch (kind_) {
    case Kind::kList:
    case Kind::kTuple: return std::get<ListPtr>(data_)->depth;
    case Kind::kDict:
    case Kind::kNamespace: return std::get<DictPtr>(data_)->depth();
    default: return 0;
  }
}

const void* Value::identity() const {
  switch (kind_) {
    case Kind::kList:
    case Kind::kTuple: return std::get<ListPtr>(data_).get();
    case Kind::kDict:
    case Kind::kNamespace: return std::get<DictPtr>(data_).get();
    case Kind::kCallable: return std::get<CallablePtr>(data_).get();
    default: return nullptr;
  }
}

// ---------------------------------------------------------------------------------
// Dict

static bool hashable(const Value& key) {
  switch (key.kind()) {
    case Value::Kind::kList:
    case Value::Kind::kDict:
    case Value::Kind::kUndefined: return false;
    case Value::Kind::kTuple:
      for (const Value& item : key.items())
        if (!hashable(item)) return false;
      return true;
    default: return true;
  }
}

size_t Dict::index_of(std::string_view key) const {
  if (string_index_.empty()) {
    for (size_t i = 0; i < entries_.size(); ++i)
      if (entries_[i].first.is_string() && entries_[i].first.str() == key) return i;
    return kNotFound;
  }
  auto it = string_index_.find(std::string(key));
  return it == string_index_.end() ? kNotFound : it->second;
}

const Value* Dict::find(std::string_view key) const {
  size_t i = index_of(key);
  return i == kNotFound ? nullptr : &entries_[i].second;
}

const Value* Dict::find(const Value& key) const {
  if (key.is_string()) return find(std::string_view(key.str()));
  if (!hashable(key)) return nullptr;
  for (const auto& [k, v] : entries_)
    if (!k.is_string() && equal(k, key)) return &v;
  return nullptr;
}

void Dict::set(Value key, Value value) {
  if (!hashable(key)) fail("unhashable type: '" + type_name(key) + "'");
  depth_ = std::max({depth_, key.depth() + 1, value.depth() + 1});
  if (depth_ > kMaxDepth) fail("values nest too deeply");
  if (key.is_string()) {
    if (size_t i = index_of(key.str()); i != kNotFound) {
      entries_[i].second = std::move(value);
      return;
    }
    if (!string_index_.empty()) string_index_.emplace(key.str(), entries_.size());
    entries_.emplace_back(std::move(key), std::move(value));
    // Small dicts (messages, loop variables) are searched; big ones get an index.
    if (string_index_.empty() && entries_.size() > kIndexAbove) {
      for (size_t i = 0; i < entries_.size(); ++i)
        if (entries_[i].first.is_string()) string_index_.emplace(entries_[i].first.str(), i);
    }
    return;
  }
  for (auto& [k, v] : entries_) {
    if (!k.is_string() && equal(k, key)) {
      v = std::move(value);
      return;
    }
  }
  entries_.emplace_back(std::move(key), std::move(value));
}

void Dict::clear() {
  entries_.clear();
  string_index_.clear();
  depth_ = 1;
}

// ---------------------------------------------------------------------------------
// Truth, equality, order

bool truthy(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone: return false;
    case Value::Kind::kBool: return v.as_bool();
    case Value::Kind::kInt: return v.as_int() != 0;
    case Value::Kind::kFloat: return v.as_double() != 0.0;
    case Value::Kind::kString: return !v.str().empty();
    case Value::Kind::kList:
    case Value::Kind::kTuple: return !v.items().empty();
    case Value::Kind::kDict: return !v.dict().empty();
    case Value::Kind::kNamespace:
    case Value::Kind::kCallable: return true;
  }
  return false;
}

static bool numbers_equal(const Value& a, const Value& b) {
  if (a.is_integral() && b.is_integral()) return a.as_int() == b.as_int();
  return a.as_double() == b.as_double();
}

bool equal(const Value& a, const Value& b) {
  WorkBudget::charge();
  if (a.is_number() && b.is_number()) return numbers_equal(a, b);
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone: return true;
    case Value::Kind::kString: return a.str() == b.str();
    case Value::Kind::kList:
    case Value::Kind::kTuple: {
      if (a.identity() == b.identity()) return true;
      const auto& x = a.items();
      const auto& y = b.items();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i)
        if (!equal(x[i], y[i])) return false;
      return true;
    }
    case Value::Kind::kDict: {
      if (a.identity() == b.identity()) return true;
      if (a.dict().size() != b.dict().size()) return false;
      for (const auto& [k, v] : a.dict().entries()) {
        const Value* other = b.dict().find(k);
        if (!other || !equal(v, *other)) return false;
      }
      return true;
    }
    default: return a.identity() == b.identity();
  }
}

[[noreturn]] static void unorderable(const Value& a, const Value& b) {
  fail("'<' not supported between instances of '" + type_name(a) + "' and '" + type_name(b) +
       "'");
}

bool less(const Value& a, const Value& b) {
  WorkBudget::charge();
  if (a.is_number() && b.is_number()) {
    if (a.is_integral() && b.is_integral()) return a.as_int() < b.as_int();
    return a.as_double() < b.as_double();
  }
  if (a.is_string() && b.is_string()) return a.str() < b.str();
  if ((a.is_list() && b.is_list()) || (a.is_tuple() && b.is_tuple())) {
    const auto& x = a.items();
    const auto& y = b.items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i)
      if (!equal(x[i], y[i])) return less(x[i], y[i]);
    return x.size() < y.size();
  }
  unorderable(a, b);
}

std::string type_name(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return "Undefined";
    case Value::Kind::kNone: return "NoneType";
    case Value::Kind::kBool: return "bool";
    case Value::Kind::kInt: return "int";
    case Value::Kind::kFloat: return "float";
    case Value::Kind::kString: return "str";
    case Value::Kind::kList: return "list";
    case Value::Kind::kTuple: return "tuple";
    case Value::Kind::kDict: return "dict";
    case Value::Kind::kNamespace: return "Namespace";
    case Value::Kind::kCallable: return "function";
  }
  return "object";
}

// ---------------------------------------------------------------------------------
// str() and repr()

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);  // "-1.2345e+06": shortest round-trip digits
  std::string sign;
  if (sci[0] == '-') {
    sign = "-";
    sci.erase(0, 1);
  }
  size_t e = sci.find('e');
  std::string digits = sci.substr(0, e);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  int exp10 = std::stoi(sci.substr(e + 1));
  // Python's repr: value = 0.DIGITS * 10**decpt; scientific when decpt <= -4 or > 16.
  int decpt = exp10 + 1;
  std::string out = sign;
  if (decpt > -4 && decpt <= 16) {
    if (decpt <= 0) {
      out += "0." + std::string(static_cast<size_t>(-decpt), '0') + digits;
    } else if (static_cast<size_t>(decpt) >= digits.size()) {
      out += digits + std::string(static_cast<size_t>(decpt) - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, static_cast<size_t>(decpt)) + "." +
             digits.substr(static_cast<size_t>(decpt));
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  char exp_buf[16];
  snprintf(exp_buf, sizeof(exp_buf), "e%c%02d", exp10 < 0 ? '-' : '+', std::abs(exp10));
  return out + exp_buf;
}

// `depth` counts the containers being printed: values nest at most kMaxDepth deep,
// except through a namespace that refers to itself, which this stops.
static void append_repr(std::string& out, const Value& v, uint32_t depth);

static void append_sequence(std::string& out, const Value& v, uint32_t depth) {
  const bool tuple = v.is_tuple();
  out += tuple ? '(' : '[';
  const auto& items = v.items();
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += ", ";
    append_repr(out, items[i], depth + 1);
  }
  if (tuple && items.size() == 1) out += ',';
  out += tuple ? ')' : ']';
}

static void append_dict(std::string& out, const Dict& d, uint32_t depth) {
  out += '{';
  bool first = true;
  for (const auto& [k, v] : d.entries()) {
    if (!first) out += ", ";
    first = false;
    append_repr(out, k, depth + 1);
    out += ": ";
    append_repr(out, v, depth + 1);
  }
  out += '}';
}

static void append_str(std::string& out, const Value& v, uint32_t depth) {
  WorkBudget::charge();
  if (out.size() > kMaxStringBytes) fail("string result too large");
  if (depth > kMaxDepth) fail("values nest too deeply to print");
  switch (v.kind()) {
    case Value::Kind::kUndefined: return;
    case Value::Kind::kNone: out += "None"; return;
    case Value::Kind::kBool: out += v.as_bool() ? "True" : "False"; return;
    case Value::Kind::kInt: out += std::to_string(v.as_int()); return;
    case Value::Kind::kFloat: out += float_repr(v.as_double()); return;
    case Value::Kind::kString: out += v.str(); return;
    case Value::Kind::kList:
    case Value::Kind::kTuple: append_sequence(out, v, depth); return;
    case Value::Kind::kDict: append_dict(out, v.dict(), depth); return;
    case Value::Kind::kNamespace:
      out += "<Namespace ";
      append_dict(out, v.namespace_dict(), depth);
      out += '>';
      return;
    case Value::Kind::kCallable: out += v.callable().self_repr; return;
  }
}

static void append_repr(std::string& out, const Value& v, uint32_t depth) {
  if (v.is_string()) {
    WorkBudget::charge(1 + static_cast<int64_t>(v.str().size() / 64));
    out += repr_string(v.str());
  } else if (v.is_undefined()) {
    out += "Undefined";
  } else {
    append_str(out, v, depth);
  }
}

std::string to_str(const Value& v) {
  if (v.is_string()) return v.str();
  std::string out;
  append_str(out, v, 0);
  return out;
}

std::string to_repr(const Value& v) {
  std::string out;
  append_repr(out, v, 0);
  return out;
}

// ---------------------------------------------------------------------------------
// WorkBudget

static thread_local WorkBudget* g_active_budget = nullptr;

WorkBudget::WorkBudget(int64_t steps) : left_(steps), previous_(g_active_budget) {
  g_active_budget = this;
}

WorkBudget::~WorkBudget() { g_active_budget = previous_; }

void WorkBudget::charge(int64_t steps) {
  WorkBudget* b = g_active_budget;
  if (!b) return;
  b->left_ -= steps;
  if (b->left_ < 0) {
    b->left_ = 0;
    fail("template rendering exceeded its work limit");
  }
}

}  // namespace pagoda::jinja

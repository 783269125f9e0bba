// The global functions of the environment transformers renders chat templates in:
// jinja2's range, dict, namespace and joiner (cycler and lipsum are not provided),
// plus transformers' raise_exception and strftime_now.
#include <ctime>
#include <memory>

#include "jinja/builtins.h"
#include "jinja/eval.h"

namespace pagoda::jinja {
namespace {

// jinja2's sandbox refuses larger ranges (MAX_RANGE).
constexpr int64_t kMaxRange = 100000;

Value g_range(Interpreter&, CallArgs& a) {
  if (!a.keyword.empty()) fail("range() takes no keyword arguments");
  if (a.positional.empty() || a.positional.size() > 3)
    fail("range expected 1 to 3 arguments, got " + std::to_string(a.positional.size()));
  int64_t start = 0, stop, step = 1;
  if (a.positional.size() == 1) {
    stop = arg_int("range", a.positional[0]);
  } else {
    start = arg_int("range", a.positional[0]);
    stop = arg_int("range", a.positional[1]);
    if (a.positional.size() == 3) step = arg_int("range", a.positional[2]);
  }
  if (step == 0) fail("range() arg 3 must not be zero");
  // Count first, in a width that cannot overflow, then refuse what the sandbox would.
  __int128 span = step > 0 ? static_cast<__int128>(stop) - start : static_cast<__int128>(start) - stop;
  __int128 abs_step = step > 0 ? step : -static_cast<__int128>(step);
  __int128 count = span <= 0 ? 0 : (span + abs_step - 1) / abs_step;
  if (count > kMaxRange)
    fail("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
  std::vector<Value> out;
  out.reserve(static_cast<size_t>(count));
  for (int64_t i = 0; i < static_cast<int64_t>(count); ++i) out.emplace_back(start + i * step);
  return Value::list(std::move(out));
}

// dict(mapping_or_pairs, **kwargs) and namespace(...) build their attributes alike.
Dict dict_from_args(Interpreter& in, const CallArgs& a, const char* fn) {
  Dict d;
  if (a.positional.size() > 1)
    fail(std::string(fn) + " expected at most 1 positional argument, got " +
         std::to_string(a.positional.size()));
  if (!a.positional.empty()) {
    const Value& src = a.positional[0];
    if (src.is_dict() || src.is_namespace()) {
      const Dict& from = src.is_dict() ? src.dict() : src.namespace_dict();
      for (const auto& [k, v] : from.entries()) d.set(k, v);
    } else {
      for (const Value& pair : in.iterate(src)) {
        std::vector<Value> kv = in.iterate(pair);
        if (kv.size() != 2) fail("dictionary update sequence element has wrong length; 2 is required");
        d.set(kv[0], kv[1]);
      }
    }
  }
  for (const auto& [k, v] : a.keyword) d.set(Value(k), v);
  return d;
}

Value g_dict(Interpreter& in, CallArgs& a) { return Value::dict(dict_from_args(in, a, "dict")); }

Value g_namespace(Interpreter& in, CallArgs& a) {
  return in.new_namespace(dict_from_args(in, a, "namespace"));
}

// joiner(sep): a callable returning "" the first time and sep afterwards.
Value g_joiner(Interpreter&, CallArgs& a) {
  auto p = bind_args("joiner", a, {"sep"});
  std::string sep = p[0] ? arg_string("joiner", *p[0]) : ", ";
  auto used = std::make_shared<bool>(false);
  return Value::callable("<jinja2.utils.Joiner object>", [sep, used](Interpreter&, CallArgs& args) {
    bind_args("joiner", args, {});
    if (!*used) {
      *used = true;
      return Value("");
    }
    return Value(sep);
  });
}

// transformers: raise jinja2.exceptions.TemplateError(message).
Value g_raise_exception(Interpreter&, CallArgs& a) {
  auto p = bind_args("raise_exception", a, {"message"});
  fail(p[0] ? to_str(*p[0]) : std::string("raise_exception() called"));
}

// transformers: datetime.now().strftime(format), local time (Python's strftime is
// the C library's on Linux, so the formats agree).
Value g_strftime_now(Interpreter&, CallArgs& a) {
  auto p = bind_args("strftime_now", a, {"format"});
  if (!p[0]) fail("strftime_now() missing required argument 'format'");
  std::string format = arg_string("strftime_now", *p[0]);
  std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char buf[512];
  size_t n = format.empty() ? 0 : std::strftime(buf, sizeof(buf), format.c_str(), &local);
  if (n == 0 && !format.empty()) fail("strftime_now(): format produced no output or is too long");
  return Value(std::string(buf, n));
}

}  // namespace

Dict make_globals() {
  Dict g;
  g.set(Value("range"), Value::callable("<class 'range'>", g_range));
  g.set(Value("dict"), Value::callable("<class 'dict'>", g_dict));
  g.set(Value("namespace"), Value::callable("<class 'jinja2.utils.Namespace'>", g_namespace));
  g.set(Value("joiner"), Value::callable("<class 'jinja2.utils.Joiner'>", g_joiner));
  g.set(Value("raise_exception"), Value::callable("<function raise_exception>", g_raise_exception));
  g.set(Value("strftime_now"), Value::callable("<function strftime_now>", g_strftime_now));
  return g;
}

}  // namespace pagoda::jinja

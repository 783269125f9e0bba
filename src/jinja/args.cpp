// Argument handling shared by the builtins (declared in jinja/builtins.h).
#include "jinja/builtins.h"
#include "jinja/eval.h"
#include "jinja/pystr.h"

namespace pagoda::jinja {

std::vector<std::optional<Value>> bind_args(std::string_view function, const CallArgs& args,
                                            std::initializer_list<std::string_view> params) {
  std::vector<std::optional<Value>> slots(params.size());
  if (args.positional.size() > params.size())
    fail(std::string(function) + "() takes at most " + std::to_string(params.size()) +
         " argument(s) (" + std::to_string(args.positional.size()) + " given)");
  for (size_t i = 0; i < args.positional.size(); ++i) slots[i] = args.positional[i];
  for (const auto& [key, value] : args.keyword) {
    size_t i = 0;
    for (std::string_view p : params) {
      if (p == key) break;
      ++i;
    }
    if (i == params.size())
      fail(std::string(function) + "() got an unexpected keyword argument '" + key + "'");
    if (slots[i]) fail(std::string(function) + "() got multiple values for argument '" + key + "'");
    slots[i] = value;
  }
  return slots;
}

std::string arg_string(std::string_view function, const Value& v) {
  if (!v.is_string())
    fail(std::string(function) + "() argument must be str, not " + type_name(v));
  return v.str();
}

int64_t arg_int(std::string_view function, const Value& v) {
  if (!v.is_integral())
    fail("'" + type_name(v) + "' object cannot be interpreted as an integer (in " +
         std::string(function) + "())");
  return v.as_int();
}

Value get_attribute_path(Interpreter& interp, const Value& item, const Value& path) {
  if (!path.is_string()) return interp.getitem(item, path);
  Value v = item;
  for (const std::string& part : py_split(path.str(), std::string("."), -1)) {
    bool digits = !part.empty() && part.find_first_not_of("0123456789") == std::string::npos;
    v = digits && part.size() < 18 ? interp.getitem(v, Value(static_cast<int64_t>(std::stoll(part))))
                                   : interp.getitem(v, Value(part));
  }
  return v;
}

}  // namespace pagoda::jinja

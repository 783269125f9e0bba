#include "chat/json_value.h"

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace pagoda {

jinja::Value jinja_from_json(const nlohmann::ordered_json& j) {
  using jinja::Value;
  using Type = nlohmann::ordered_json::value_t;
  switch (j.type()) {
    case Type::null: return Value::none();
    case Type::boolean: return Value(j.get<bool>());
    case Type::number_integer: return Value(j.get<int64_t>());
    case Type::number_unsigned: {
      const uint64_t u = j.get<uint64_t>();
      if (u <= static_cast<uint64_t>(INT64_MAX)) return Value(static_cast<int64_t>(u));
      return Value(static_cast<double>(u));  // Python would keep a big int
    }
    case Type::number_float: return Value(j.get<double>());
    case Type::string: return Value(j.get<std::string>());
    case Type::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& item : j) items.push_back(jinja_from_json(item));
      return Value::list(std::move(items));
    }
    case Type::object: {
      jinja::Dict d;
      for (const auto& [key, item] : j.items()) d.set(Value(key), jinja_from_json(item));
      return Value::dict(std::move(d));
    }
    default: return Value::none();
  }
}

}  // namespace pagoda

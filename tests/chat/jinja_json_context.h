// Builds template variables (jinja::Value) from JSON text, for the chat template tests
// and pagoda-chat-template-tool. JSON objects keep their key order, as Python's
// json.loads does, because the order shows in what templates print (tojson, dict
// iteration). nlohmann::json stays out of src/: the engine has its own value type.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "jinja/value.h"

namespace pagoda::test {

inline jinja::Value jinja_from_json(const nlohmann::ordered_json& j) {
  using jinja::Value;
  switch (j.type()) {
    case nlohmann::json::value_t::null: return Value::none();
    case nlohmann::json::value_t::boolean: return Value(j.get<bool>());
    case nlohmann::json::value_t::number_integer: return Value(j.get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: {
      uint64_t u = j.get<uint64_t>();
      if (u <= static_cast<uint64_t>(INT64_MAX)) return Value(static_cast<int64_t>(u));
      return Value(static_cast<double>(u));  // Python would keep a big int
    }
    case nlohmann::json::value_t::number_float: return Value(j.get<double>());
    case nlohmann::json::value_t::string: return Value(j.get<std::string>());
    case nlohmann::json::value_t::array: {
      std::vector<Value> items;
      for (const auto& item : j) items.push_back(jinja_from_json(item));
      return Value::list(std::move(items));
    }
    case nlohmann::json::value_t::object: {
      jinja::Dict d;
      for (const auto& [key, item] : j.items()) d.set(Value(key), jinja_from_json(item));
      return Value::dict(std::move(d));
    }
    default: return Value::none();
  }
}

// Parses `text` (a JSON object); a parse error gives an undefined Value.
inline jinja::Value jinja_context(const std::string& text) {
  auto j = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return jinja::Value::undefined("invalid JSON");
  return jinja_from_json(j);
}

}  // namespace pagoda::test

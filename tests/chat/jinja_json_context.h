// Builds template variables (jinja::Value) from JSON text, for the chat template tests
// and pagoda-chat-template-tool, with the server's converter (chat/json_value.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/json_value.h"
#include "jinja/value.h"

namespace pagoda::test {

// Parses `text` (a JSON object); a parse error gives an undefined Value.
inline jinja::Value jinja_context(const std::string& text) {
  auto j = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return jinja::Value::undefined("invalid JSON");
  return pagoda::jinja_from_json(j);
}

}  // namespace pagoda::test

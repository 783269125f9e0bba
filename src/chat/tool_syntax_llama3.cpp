// Llama 3.1-3.3's JSON tool calls: the reply is `{"name": NAME, "parameters": {...}}`
// (after `<|python_tag|>`, a control token that decodes to nothing), several separated
// by `;`. Only a reply that starts with `{` is a call.
#include <nlohmann/json.hpp>

#include "chat/tool_syntax_common.h"

namespace pagoda {
namespace {

bool detect(std::string_view source) {
  return source.find("<|python_tag|>") != std::string_view::npos ||
         (source.find("\"parameters\"") != std::string_view::npos && source.find("ipython") != std::string_view::npos);
}

// One past the `}` closing the object that opens at `start`, or npos.
size_t object_end(std::string_view s, size_t start) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = start; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (--depth == 0) return i + 1;
    }
  }
  return std::string_view::npos;
}

std::optional<std::vector<ToolCall>> parse(std::string_view region) {
  std::vector<ToolCall> calls;
  size_t at = 0;
  while (at < region.size()) {
    while (at < region.size() && (json_space(region[at]) || region[at] == ';')) ++at;
    if (at == region.size()) break;
    if (region[at] != '{') return std::nullopt;
    const size_t end = object_end(region, at);
    if (end == std::string_view::npos) return std::nullopt;
    auto call = tool_call_from_json(region.substr(at, end - at), "parameters");
    if (!call) return std::nullopt;
    calls.push_back(std::move(*call));
    at = end;
  }
  if (calls.empty()) return std::nullopt;
  return calls;
}

std::string prefix(const std::string& name) {
  return "{\"name\": " + nlohmann::json(name).dump() + ", \"parameters\": ";
}

}  // namespace

const ToolSyntax kLlama3JsonToolSyntax{
    .name = "llama3_json",
    .detect = detect,
    .openers = {"{"},
    .opener_at_start = true,
    .parse = parse,
    .call_prefix = prefix,
    .call_suffix = "}",
    .separator = "; ",
    .calls_begin = "",
    .calls_end = "",
    .id_length = 0,
};

}  // namespace pagoda

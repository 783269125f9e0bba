// Hermes' tool-call syntax, which Qwen 2.5, Qwen 3, Hermes 2/3 and many fine-tunes
// write: each call is `<tool_call>\n{"name": NAME, "arguments": {...}}\n</tool_call>`,
// one after another for parallel calls.
#include <nlohmann/json.hpp>

#include "chat/tool_syntax_common.h"

namespace pagoda {
namespace {

constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";

bool detect(std::string_view source) { return source.find(kOpen) != std::string_view::npos; }

std::optional<std::vector<ToolCall>> parse(std::string_view region) {
  std::vector<ToolCall> calls;
  size_t at = 0;
  for (;;) {
    const size_t open = region.find(kOpen, at);
    if (open == std::string_view::npos) break;
    const size_t body = open + kOpen.size();
    size_t close = region.find(kClose, body);
    // A reply cut after the JSON (no closing tag) still says what it calls.
    const size_t end = close == std::string_view::npos ? region.size() : close;
    auto call = tool_call_from_json(region.substr(body, end - body), "arguments");
    // A reply cut inside its last call (max_tokens) keeps the calls it completed.
    if (!call && close == std::string_view::npos && !calls.empty()) break;
    if (!call) return std::nullopt;
    calls.push_back(std::move(*call));
    if (close == std::string_view::npos) break;
    at = close + kClose.size();
  }
  if (calls.empty()) return std::nullopt;
  return calls;
}

std::string prefix(const std::string& name) {
  return "<tool_call>\n{\"name\": " + nlohmann::json(name).dump() + ", \"arguments\": ";
}

}  // namespace

const ToolSyntax kHermesToolSyntax{
    .name = "hermes",
    .detect = detect,
    .openers = {std::string(kOpen)},
    .opener_at_start = false,
    .parse = parse,
    .call_prefix = prefix,
    .call_suffix = "}\n</tool_call>",
    .separator = "\n",
    .calls_begin = "",
    .calls_end = "",
    .id_length = 0,
};

}  // namespace pagoda

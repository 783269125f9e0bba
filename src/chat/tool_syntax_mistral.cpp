// Mistral's JSON-array tool calls (Mistral 7B Instruct v0.3, Mixtral 8x22B, Mistral Nemo,
// Mistral Small 2409-2501): the reply is `[TOOL_CALLS][{"name": NAME, "arguments":
// {...}}, ...]`, every parallel call an element of one array. [TOOL_CALLS] is a control
// token that decodes to nothing (as Llama 3's <|python_tag|>), so a call is a reply that
// starts with `[{`; written out as text it is accepted too. Call ids are 9 letters and
// digits: Mistral's templates refuse any other tool_call_id in the history. The later
// `[TOOL_CALLS]name[ARGS]{...}` syntax (Mistral Small 3.2, Magistral, Devstral) decodes to
// an unmarked `name{...}` and is not detected.
#include <nlohmann/json.hpp>

#include "chat/tool_syntax_common.h"

namespace pagoda {
namespace {

constexpr std::string_view kMarker = "[TOOL_CALLS]";

bool detect(std::string_view source) {
  return source.find(kMarker) != std::string_view::npos && source.find("[ARGS]") == std::string_view::npos;
}

bool valid_id(const std::string& id) {
  if (id.size() != 9) return false;
  for (char c : id)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))) return false;
  return true;
}

std::optional<std::vector<ToolCall>> parse(std::string_view region) {
  size_t at = 0;
  while (at < region.size() && json_space(region[at])) ++at;
  if (region.substr(at).starts_with(kMarker)) at += kMarker.size();
  using ojson = nlohmann::ordered_json;
  const std::string_view body = region.substr(at);
  ojson j = ojson::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    // A reply cut inside its last call (max_tokens) keeps the calls it completed: close
    // the array after the last complete element.
    for (size_t cut = body.rfind('}'); cut != std::string_view::npos && cut > 0; cut = body.rfind('}', cut - 1)) {
      std::string closed(body.substr(0, cut + 1));
      closed += "]";
      j = ojson::parse(closed, nullptr, false);
      if (!j.is_discarded()) break;
    }
  }
  if (j.is_discarded() || !j.is_array() || j.empty()) return std::nullopt;
  std::vector<ToolCall> calls;
  for (const ojson& e : j) {
    if (!e.is_object()) return std::nullopt;
    auto call = tool_call_from_json(e.dump(), "arguments");
    if (!call) return std::nullopt;
    if (auto id = e.find("id"); id != e.end() && id->is_string() && valid_id(id->get<std::string>()))
      call->id = id->get<std::string>();
    calls.push_back(std::move(*call));
  }
  return calls;
}

std::string prefix(const std::string& name) {
  return "{\"name\": " + nlohmann::json(name).dump() + ", \"arguments\": ";
}

}  // namespace

const ToolSyntax kMistralToolSyntax{
    .name = "mistral",
    .detect = detect,
    .openers = {std::string(kMarker), "[{"},
    .opener_at_start = true,
    .parse = parse,
    .call_prefix = prefix,
    .call_suffix = "}",
    .separator = ", ",
    .calls_begin = "[",
    .calls_end = "]",
    .id_length = 9,
};

}  // namespace pagoda

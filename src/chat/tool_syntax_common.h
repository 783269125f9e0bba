// What the tool-call syntaxes (tool_syntax_<name>.cpp) share: reading one call's JSON
// object and the registry's declarations. Internal to src/chat/.
#pragma once

#include <optional>
#include <string_view>

#include "chat/tool_syntax.h"

namespace pagoda {

// JSON's whitespace (between the calls and around them).
inline bool json_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

// {"name": ..., <args_key>: {...}} as a call (arguments also accepted as "arguments"
// and as a JSON string holding the object); nullopt when it is not one.
std::optional<ToolCall> tool_call_from_json(std::string_view text, std::string_view args_key);

extern const ToolSyntax kHermesToolSyntax;
extern const ToolSyntax kLlama3JsonToolSyntax;
extern const ToolSyntax kMistralToolSyntax;

}  // namespace pagoda

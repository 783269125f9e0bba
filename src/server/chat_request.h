// A parsed chat request fitted to the model's chat template before it is rendered: the
// server's default chat_template_kwargs go under the request's, tools are checked
// against the template's tool-call syntax and tool_choice becomes a constraint (required
// and named calls always parse and match the tool's parameters), and the reply is set
// to have its <think> text split off when the template reasons.
//
// Cost: building a structural tag (a walk of each tool's schema); compiling it is the
// session's. Pure function of its inputs; thread-safe.
#pragma once

#include <memory>
#include <optional>

#include "chat/reasoning_split.h"
#include "chat/tool_syntax.h"
#include "jinja/value.h"
#include "server/api_error.h"
#include "server/openai_request.h"

namespace pagoda {

// What serve_command.cpp learns from the template and the flags.
struct ChatConventions {
  const ToolSyntax* tool_syntax = nullptr;  // detected, or --tool-call-parser; null: no tools
  bool template_reasons = false;            // the template writes <think> ... </think>
  ReasoningFormat reasoning_format = ReasoningFormat::kAuto;  // --reasoning-format
  jinja::Dict template_kwargs;              // --chat-template-kwargs
};

std::optional<ApiError> fit_chat_request(const ChatConventions& conventions, ApiRequest& r);

}  // namespace pagoda

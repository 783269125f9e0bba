#include "server/chat_request.h"

#include <fmt/format.h>

namespace pagoda {

std::optional<ApiError> fit_chat_request(const ChatConventions& cv, ApiRequest& r) {
  if (!cv.template_kwargs.empty()) {
    jinja::Dict merged = cv.template_kwargs;
    for (const auto& [key, value] : r.chat_input.kwargs.entries()) merged.set(key, value);
    r.chat_input.kwargs = std::move(merged);
  }
  const ReasoningFormat rf = r.reasoning_format.value_or(cv.reasoning_format);
  r.split_reasoning = rf == ReasoningFormat::kDeepSeek || (rf == ReasoningFormat::kAuto && cv.template_reasons);

  if (r.tools.empty()) return std::nullopt;
  if (cv.tool_syntax == nullptr)
    return ApiError::bad_request(
        "'tools': this model's chat template does not render tools in a tool-call syntax Pagoda knows (start the "
        "server with --chat-template FILE for one that does, and --tool-call-parser to name its syntax)",
        "tools");
  const bool constrained_elsewhere = r.constraint.has_value();
  if (constrained_elsewhere && (r.tool_choice == ToolChoice::kRequired || r.tool_choice == ToolChoice::kNamed))
    return ApiError::bad_request(fmt::format("'tool_choice': a required or named tool call cannot be combined with "
                                             "'{}' (the reply is the call)",
                                             r.constraint_field),
                                 "tool_choice");
  if (r.tool_choice != ToolChoice::kNone) r.tool_syntax = cv.tool_syntax;
  if (constrained_elsewhere) return std::nullopt;  // response_format shapes the reply; calls are still read
  auto tag = tool_call_structural_tag(*cv.tool_syntax, r.tools, r.tool_choice, r.tool_choice_name,
                                      r.parallel_tool_calls);
  if (!tag) return ApiError::bad_request(fmt::format("'tools': {}", tag.status().message()), "tools");
  if (tag->empty()) return std::nullopt;
  ConstraintSpec spec;
  spec.kind = ConstraintKind::kStructuralTag;
  spec.text = std::move(tag.value());
  r.constraint = std::move(spec);
  r.tool_calls_constrained = true;
  r.constraint_field = r.tool_choice == ToolChoice::kAuto || r.tool_choice == ToolChoice::kNone ? "tools" : "tool_choice";
  return std::nullopt;
}

}  // namespace pagoda

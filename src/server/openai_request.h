// The request bodies of /v1/completions and /v1/chat/completions, parsed and validated
// into what the engine needs. Field names, types, ranges and defaults follow OpenAI's API
// (plus vLLM's extensions top_k, min_p, repetition_penalty, ignore_eos); a wrong type or
// a value out of range is an ApiError naming the field. Unknown fields are ignored, as
// OpenAI does.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "chat/chat_prompt.h"
#include "chat/reasoning_split.h"
#include "chat/tool_syntax.h"
#include "constrain/constraint.h"
#include "engine/request.h"
#include "server/api_error.h"

namespace pagoda {

// `compress_prompt`: the server compresses the prompt before running it
// (server/compress_endpoint.h).
struct PromptCompression {
  double ratio = 0.5;  // the share of the prompt's tokens to keep, in (0, 1]
  std::string scorer;  // when given, must name the server's scorer
};

struct ApiRequest {
  bool chat = false;
  std::string model;
  // Completions: one or more prompts, each text or token ids.
  std::vector<std::variant<std::string, std::vector<int32_t>>> prompts;
  // Chat: the conversation as the template reads it (messages with their tool calls and
  // tool results, tools, chat_template_kwargs, add_generation_prompt). Content parts are
  // joined into one text, a null content is "", and each tool call's `arguments` string
  // is parsed into an object (as vLLM does: templates print it with tojson).
  ChatInput chat_input;
  // Tools and how the reply may use them (OpenAI's defaults: auto when tools are given,
  // parallel calls allowed).
  std::vector<ToolDef> tools;
  ToolChoice tool_choice = ToolChoice::kAuto;
  std::string tool_choice_name;  // ToolChoice::kNamed
  bool parallel_tool_calls = true;
  std::optional<ReasoningFormat> reasoning_format;  // llama.cpp's per-request override
  // How the reply is read back, set by the server from the chat template: the tool-call
  // syntax to extract (null: none), and whether <think> is split off (and already open).
  const ToolSyntax* tool_syntax = nullptr;
  // The tool calls are grammar-constrained (tool_choice required or named, or auto behind
  // a textual opener): a streamed call's arguments may then go out as they are written.
  bool tool_calls_constrained = false;
  bool split_reasoning = false;
  bool reasoning_open = false;
  RequestParams params;           // n, max_tokens, sampling, logprobs, ...
  bool max_tokens_given = false;
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;
  bool echo = false;
  int32_t top_logprobs = 0;       // chat: logprobs=true plus this many alternatives
  // Structured output, from whichever field asked for it (OpenAI's response_format,
  // vLLM's guided_* and structured_outputs, llama.cpp's grammar and json_schema); the
  // field is named in the 400 when the spec does not compile.
  std::optional<ConstraintSpec> constraint;
  std::string constraint_field;
  std::optional<PromptCompression> compress_prompt;
};

// How much one request may ask for, so that a body of a few hundred bytes cannot make
// thousands of sequences (each with its own tokens, sampler and output state): prompts
// per request, samples per prompt, sequences (prompts x n) and tokens (prompt and
// completion, times n). Each has a `pagoda serve` flag, named in the 400 that refuses a
// request over it. 0 turns a limit off.
struct RequestLimits {
  int32_t max_prompts = 64;      // --max-prompts-per-request
  int32_t max_n = 128;           // --max-n (OpenAI's own ceiling)
  int64_t max_sequences = 256;   // --max-seqs-per-request
  int64_t max_tokens = 0;        // --max-request-tokens; serve derives it from the KV capacity
};

// Parses a body; `chat` picks the endpoint's schema. With `limits`, the counts (prompts,
// n, prompts x n) are checked too, before any prompt is tokenized.
std::variant<ApiRequest, ApiError> parse_api_request(const std::string& body, bool chat,
                                                     const RequestLimits* limits = nullptr);

// The count limits of a parsed request (what parse_api_request checks when given limits).
std::optional<ApiError> check_request_counts(const ApiRequest& r, const RequestLimits& limits);

// The token limit: the sum over prompts of (prompt tokens + completion tokens) x n, where
// a sample without max_tokens counts as filling the context (`max_model_len`).
std::optional<ApiError> check_request_tokens(const ApiRequest& r, const std::vector<std::vector<int32_t>>& prompts,
                                             int32_t max_tokens_per_sample, int32_t max_model_len,
                                             const RequestLimits& limits);

}  // namespace pagoda

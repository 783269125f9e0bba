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

#include "chat/chat_template.h"
#include "engine/request.h"
#include "server/api_error.h"

namespace pagoda {

struct ApiRequest {
  bool chat = false;
  std::string model;
  // Completions: one or more prompts, each text or token ids.
  std::vector<std::variant<std::string, std::vector<int32_t>>> prompts;
  // Chat: the conversation.
  std::vector<ChatMessage> messages;
  bool add_generation_prompt = true;
  RequestParams params;           // n, max_tokens, sampling, logprobs, ...
  bool max_tokens_given = false;
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;
  bool echo = false;
  int32_t top_logprobs = 0;       // chat: logprobs=true plus this many alternatives
};

// Parses a body; `chat` picks the endpoint's schema.
std::variant<ApiRequest, ApiError> parse_api_request(const std::string& body, bool chat);

}  // namespace pagoda

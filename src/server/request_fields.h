// The request fields Pagoda knows of but does not implement, from OpenAI's API, vLLM's
// and llama.cpp's extensions. A request that sets one to anything but its no-op value
// (the value that asks for what Pagoda does anyway, e.g. use_beam_search: false) is a
// 400 naming the field, never a reply that silently ignores it. The fields OpenAI
// documents as having no effect on the output (user, metadata, store, service_tier, ...)
// are not listed: they stay accepted. docs/server.md's table lists the same fields; a
// test walks both.
//
// Constant data; thread-safe.
#pragma once

#include <optional>
#include <span>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "server/api_error.h"

namespace pagoda {

struct UnimplementedField {
  const char* name;
  const char* no_op_values;  // JSON list of the values accepted (as not asking for anything); "[]": none
  const char* hint;          // what to use instead, or why not
  bool chat;                 // known on /v1/chat/completions
  bool completions;          // known on /v1/completions
};

std::span<const UnimplementedField> unimplemented_fields();

// The 400 for the first listed field `body` sets to something other than a no-op value.
std::optional<ApiError> refuse_unimplemented_fields(const nlohmann::json& body, bool chat);

}  // namespace pagoda

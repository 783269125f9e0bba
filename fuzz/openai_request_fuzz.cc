// The OpenAI request parser on arbitrary bodies, for both endpoints (the first byte
// picks): a parsed request or an ApiError naming the field, never a throw.
#include <cstddef>
#include <cstdint>
#include <string>

#include "server/openai_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool chat = (data[0] & 1) != 0;
  auto r = pagoda::parse_api_request(std::string(reinterpret_cast<const char*>(data + 1), size - 1), chat);
  if (auto* e = std::get_if<pagoda::ApiError>(&r)) (void)e->body();
  return 0;
}

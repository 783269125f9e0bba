// POST /v1/embeddings in OpenAI's shape: `input` as a text, a list of texts, a list of
// token ids or a list of such lists; `encoding_format` "float" (default) or "base64"
// (the float32 bytes, little-endian); `dimensions` only as the model's own width (no
// model Pagoda runs is trained for shortened vectors, so any other value is a 400);
// `user` accepted and ignored; llama.cpp's `embd_normalize` (default 2: L2). Every input
// runs through the engine as an embedding request (batched with whatever else is
// running), in windows of at most kEmbeddingWindow in flight (server/embedding_runs.h), so
// one request may carry any number of inputs without filling the server's queue. A
// reranker (ServerContext::reranker) without an --embedding-model answers 400. Thread-safe:
// a handler per request; the cost is the inputs' forward passes.
#pragma once

#include <string>
#include <variant>

#include "server/api_error.h"
#include "server/completion_session.h"

namespace pagoda {

struct HttpRequest;

// Inputs a request may carry (OpenAI allows 2048 per request).
inline constexpr size_t kMaxEmbeddingInputs = 2048;

// The response body, or the error to send. `on_hangup` (may be null) is how the handler
// learns the client left, so the inputs still running are aborted.
std::variant<std::string, ApiError> serve_embeddings(const ServerContext& ctx, const std::string& body,
                                                     HttpRequest* req);

}  // namespace pagoda

// Many embedding requests of one API call (/v1/embeddings' inputs, /v1/rerank's pairs)
// through an engine loop: at most kEmbeddingWindow in flight, refilled window by window, so
// a call may carry any number of them without filling the server's queue; a client that
// hangs up aborts the ones still running. Thread-safe: one call per handler thread; the
// cost is the requests' forward passes.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "engine/request.h"
#include "server/api_error.h"

namespace pagoda {

class EngineLoop;
struct HttpRequest;

// Requests in flight at once per call: enough to keep the engine's batches full, few
// enough that a 1,000-input call does not take the whole queue.
inline constexpr size_t kEmbeddingWindow = 128;

// Runs prompts[i] with params[i] (embedding requests: RequestParams::embed) and returns
// each one's StepOutput::embedding, in order; or the error to send: a 400 naming `field`
// when the engine refuses one, 429 or 503 when the server cannot queue them, 500 when a
// step fails. `req` (may be null) tells of a hang-up.
std::variant<std::vector<std::vector<float>>, ApiError> run_embedding_requests(
    EngineLoop& loop, std::vector<std::vector<int32_t>> prompts, std::vector<RequestParams> params,
    const std::string& field, HttpRequest* req);

}  // namespace pagoda

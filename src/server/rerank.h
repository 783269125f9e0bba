// POST /v1/rerank (also /rerank and /v2/rerank) in the Jina / Cohere shape that
// llama-server and vLLM answer: `query` (a string), `documents` (a list of strings or of
// {"text": ...} objects), optional `top_n` (a positive integer: the best n) and
// `return_documents` (default true: each result carries {"text"}); `model` accepted, not
// checked. Each document becomes the pair [CLS] query [SEP] document [SEP]
// (tokenizer/text_pair.h) scored by the served cross-encoder (ServerContext::reranker)
// through the engine, windowed like /v1/embeddings' inputs, so any number of documents
// fits one request. The response: {"id", "object": "list", "model", "results": [{"index",
// "relevance_score", "document"?}] best first, cut to top_n, "usage": {"prompt_tokens",
// "total_tokens"}}; the score is the classifier's raw logit, as llama-server returns it.
// Thread-safe: a handler per request; the cost is one forward pass per document.
#pragma once

#include <string>
#include <variant>

#include "server/api_error.h"
#include "server/completion_session.h"

namespace pagoda {

struct HttpRequest;

// The response body, or the error to send (400s name the field: query, documents, top_n,
// return_documents, or model when the server's model is not a reranker).
std::variant<std::string, ApiError> serve_rerank(const ServerContext& ctx, const std::string& body, HttpRequest* req);

}  // namespace pagoda

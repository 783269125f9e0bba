// The OpenAI-compatible HTTP front: routes, authentication, limits and error shapes, over
// cpp-httplib (the only file that includes it). Endpoints: POST /v1/completions and
// /v1/chat/completions (JSON or server-sent events), GET /v1/models, /health, /metrics
// (Prometheus text) and / (the web playground). Every error is OpenAI's JSON shape with
// the matching status: 400 bad request, 401 wrong or missing API key, 404, 413 body too
// large, 429 queue full (with Retry-After), 500 engine failure, 503 shutting down.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "base/status.h"
#include "server/api_error.h"
#include "server/completion_session.h"

namespace pagoda {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string api_key;              // empty: no authentication
  size_t max_body_bytes = 16u << 20;
  int http_threads = 256;           // concurrent connections being served (streams hold one each)
};

// Turns a chat request's messages into prompt token ids (the model's chat template).
using ChatPromptFn = std::function<Result<std::vector<int32_t>>(const std::vector<ChatMessage>&, bool add_generation_prompt)>;

class HttpServer {
 public:
  HttpServer(const ServerOptions& options, const ServerContext& ctx, ChatPromptFn chat_prompt);
  ~HttpServer();
  // Binds the socket; fails with a message when the address is taken or invalid.
  Status bind();
  int port() const;
  // Serves until stop(); returns false if listening failed.
  bool serve();
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pagoda

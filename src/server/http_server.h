// The OpenAI-compatible HTTP front: routes, authentication, limits and error shapes, over
// the Beast/Asio transport in http_transport.h (asynchronous socket I/O on one thread, the
// handlers on a bounded worker pool; see there for the connection limits and timeouts).
// Endpoints: POST /v1/completions and /v1/chat/completions (JSON or server-sent events),
// POST /apply-template (llama-server's: the prompt a chat request renders to), POST
// /v1/embeddings (server/embeddings.h; also as /embeddings), GET
// /v1/models, /health, /metrics (Prometheus text) and / (the web playground). Every
// error is OpenAI's JSON shape with
// the matching status: 400 bad request, 401 wrong or missing API key, 404, 413 body too
// large, 429 queue full (with Retry-After), 500 engine failure, 503 shutting down or
// overloaded; 431 headers too large; Range headers are ignored (always the full body).
#pragma once

#include <cstddef>
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
  int http_threads = 256;           // requests handled at once (a stream holds one for its length)
  size_t max_queued_http = 1024;    // complete requests waiting for a handler thread; beyond: 503
  size_t max_connections = 1024;    // open connections beyond which a new one gets 503 and is closed
  size_t max_header_bytes = 16u << 10;  // 431 beyond
  double header_timeout_s = 10;     // to receive a request's complete headers
  double body_timeout_s = 60;       // to receive its body
  double idle_timeout_s = 5;        // keep-alive wait for the next request
  double write_timeout_s = 600;     // for one write to a slow reader
};

// Renders a chat request's conversation with the model's chat template and tokenizes it.
using ChatPromptFn = std::function<Result<ChatPrompt>(const ChatInput&)>;

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

// The HTTP/1.1 transport under the server's routes (Boost.Beast over Asio; only
// http_transport.cpp includes Boost, so its compile cost stays in one file). All socket
// I/O is asynchronous on one I/O thread, so an idle or half-open connection costs a
// socket and a few hundred bytes, never a thread; a complete request goes to a bounded
// pool of worker threads for the blocking handler work. Hostile input is refused early:
// framing errors get 400, oversized headers 431, a body over the limit 413, headers or a
// body that arrive too slowly are cut off at their timeout, connections over the cap and
// requests over the worker queue get 503. Requests on one connection (pipelined or not)
// are answered in order. Thread-safety: start/stop from one thread; the handler runs on
// worker threads, concurrently for different requests.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"

namespace pagoda {

struct HttpTransportOptions {
  std::string host = "127.0.0.1";
  int port = 8080;
  size_t max_body_bytes = 16u << 20;
  size_t max_header_bytes = 16u << 10;
  int worker_threads = 64;
  size_t max_queued_requests = 1024;  // complete requests waiting for a worker; beyond: 503
  size_t max_connections = 1024;      // beyond: a quick 503 and close
  std::chrono::milliseconds header_timeout{10000};
  std::chrono::milliseconds body_timeout{60000};
  std::chrono::milliseconds idle_timeout{5000};  // keep-alive wait for the next request
  std::chrono::milliseconds write_timeout{600000};
};

struct HttpRequest {
  std::string method;
  std::string target;  // path and query as sent
  std::string path;    // without the query
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  // Runs `fn` once, on the I/O thread and so concurrently with the handler, if the
  // client hangs up before the response is written (a FIN or reset on the socket; bytes
  // of a pipelined request end the watch instead). Set by the transport.
  std::function<void(std::function<void()> fn)> on_hangup;

  std::string header(std::string_view name) const;  // case-insensitive; empty if absent
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  // Streaming (chunked) when set: called on the worker until it returns false; what it
  // appends to `out` is written before the next call. A failed write calls `on_abort`.
  std::function<bool(std::string& out)> stream;
  std::function<void()> on_abort;
};

class HttpTransport {
 public:
  using Handler = std::function<HttpResponse(HttpRequest&)>;
  // Builds the body of a transport-level error (400, 413, 431, 503, ...).
  using ErrorBody = std::function<std::string(int status, const std::string& message)>;
  using OnStatus = std::function<void(int status)>;  // every response's status, for metrics

  HttpTransport(HttpTransportOptions opts, Handler handler, ErrorBody error_body, OnStatus on_status);
  ~HttpTransport();
  Status bind();
  int port() const;
  // Serves until stop(); false if it could not run.
  bool serve();
  void stop();

 public:
  struct Impl;  // public so the connection class in the .cpp can name it

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace pagoda

#include "server/http_server.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <ctime>
#include <optional>

#include "base/log.h"
#include "server/compress_endpoint.h"
#include "server/embeddings.h"
#include "server/http_transport.h"
#include "server/playground.h"
#include "server/rerank.h"

namespace pagoda {

using json = nlohmann::json;

namespace {

std::chrono::milliseconds ms(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000.0 + 0.5));
}

HttpResponse error_response(const ApiError& e) {
  HttpResponse res;
  res.status = e.status;
  if (e.status == 429) res.headers.emplace_back("Retry-After", "1");
  res.body = e.body();
  return res;
}

HttpResponse content(std::string body, std::string type = "application/json") {
  HttpResponse res;
  res.body = std::move(body);
  res.content_type = std::move(type);
  return res;
}

// The body of an error the transport answers by itself (framing, limits, overload).
std::string transport_error_body(int status, const std::string& message) {
  ApiError e{status, message, status >= 500 ? "server_error" : "invalid_request_error", "", ""};
  if (status == 413) e.message = "the request body is too large";
  return e.body();
}

}  // namespace

struct HttpServer::Impl {
  ServerOptions opts;
  ServerContext ctx;
  ChatPromptFn chat_prompt;
  std::unique_ptr<HttpTransport> transport;

  // nullopt when authorized; otherwise the 401 to send.
  std::optional<HttpResponse> unauthorized(const HttpRequest& req) {
    if (opts.api_key.empty()) return std::nullopt;
    const std::string h = req.header("Authorization");
    if (h == "Bearer " + opts.api_key) return std::nullopt;
    return error_response(ApiError{401,
                                   h.empty() ? "Missing API key: send 'Authorization: Bearer <key>'"
                                             : "Incorrect API key provided",
                                   "invalid_request_error", "", "invalid_api_key"});
  }

  HttpResponse completions(HttpRequest& req, bool chat) {
    if (auto denied = unauthorized(req)) return std::move(*denied);
    auto parsed = parse_api_request(req.body, chat, &ctx.limits);
    if (auto* e = std::get_if<ApiError>(&parsed)) return error_response(*e);
    ApiRequest r = std::move(std::get<ApiRequest>(parsed));
    if (auto e = apply_prompt_compression(ctx, r)) return error_response(*e);
    std::vector<std::vector<int32_t>> prompts;
    if (chat) {
      if (ctx.chat)
        if (auto e = fit_chat_request(*ctx.chat, r)) return error_response(*e);
      auto p = chat_prompt(r.chat_input);
      if (!p) return error_response(ApiError::bad_request(p.status().message(), "messages"));
      r.reasoning_open = r.split_reasoning && prompt_opens_reasoning(p->text);
      prompts.push_back(std::move(p->tokens));
    } else {
      for (auto& p : r.prompts) {
        if (auto* text = std::get_if<std::string>(&p)) prompts.push_back(ctx.tokenizer->encode(*text, true, true));
        else prompts.push_back(std::get<std::vector<int32_t>>(p));
      }
    }
    const bool stream = r.stream;
    auto started = CompletionSession::start(ctx, std::move(r), std::move(prompts));
    if (auto* e = std::get_if<ApiError>(&started)) return error_response(*e);
    std::shared_ptr<CompletionSession> session = std::move(std::get<std::unique_ptr<CompletionSession>>(started));
    if (!stream) {
      // A client that hangs up while it waits frees its sequences now, not after they finish.
      if (req.on_hangup) req.on_hangup([session] { session->abort(); });
      auto body = session->wait_json();
      if (auto* e = std::get_if<ApiError>(&body)) return error_response(*e);
      return content(std::move(std::get<std::string>(body)));
    }
    HttpResponse res;
    res.content_type = "text/event-stream";
    res.headers.emplace_back("Cache-Control", "no-cache");
    res.stream = [session](std::string& out) { return session->next_events(out, std::chrono::milliseconds(100)); };
    res.on_abort = [session] { session->abort(); };
    return res;
  }

  // llama-server's /apply-template: the prompt a chat request renders to, not run.
  HttpResponse apply_template(HttpRequest& req) {
    if (auto denied = unauthorized(req)) return std::move(*denied);
    auto parsed = parse_api_request(req.body, /*chat=*/true, &ctx.limits);
    if (auto* e = std::get_if<ApiError>(&parsed)) return error_response(*e);
    ApiRequest r = std::move(std::get<ApiRequest>(parsed));
    if (ctx.chat)
      if (auto e = fit_chat_request(*ctx.chat, r)) return error_response(*e);
    auto p = chat_prompt(r.chat_input);
    if (!p) return error_response(ApiError::bad_request(p.status().message(), "messages"));
    return content(json{{"prompt", p->text}}.dump(-1, ' ', false, json::error_handler_t::replace));
  }

  HttpResponse route(HttpRequest& req) {
    // Range is ignored: a byte slice of a generated JSON body is of no use to anyone.
    const bool get = req.method == "GET";
    const bool post = req.method == "POST";
    try {
      if (post && req.path == "/v1/completions") return completions(req, false);
      if (post && req.path == "/v1/chat/completions") return completions(req, true);
      if (post && req.path == "/apply-template") return apply_template(req);
      if (post && (req.path == "/v1/embeddings" || req.path == "/embeddings")) {
        if (auto denied = unauthorized(req)) return std::move(*denied);
        auto body = serve_embeddings(ctx, req.body, &req);
        if (auto* e = std::get_if<ApiError>(&body)) return error_response(*e);
        return content(std::move(std::get<std::string>(body)));
      }
      if (post && (req.path == "/v1/rerank" || req.path == "/rerank" || req.path == "/v2/rerank")) {
        if (auto denied = unauthorized(req)) return std::move(*denied);
        auto body = serve_rerank(ctx, req.body, &req);
        if (auto* e = std::get_if<ApiError>(&body)) return error_response(*e);
        return content(std::move(std::get<std::string>(body)));
      }
      if (post && req.path == "/v1/compress") {
        if (auto denied = unauthorized(req)) return std::move(*denied);
        auto body = serve_compress(ctx, req.body);
        if (auto* e = std::get_if<ApiError>(&body)) return error_response(*e);
        return content(std::move(std::get<std::string>(body)));
      }
      if (get && req.path == "/v1/models") {
        if (auto denied = unauthorized(req)) return std::move(*denied);
        json m = {{"id", ctx.model_name}, {"object", "model"}, {"created", static_cast<int64_t>(std::time(nullptr))},
                  {"owned_by", "pagoda"}, {"root", ctx.model_name}, {"max_model_len", ctx.max_model_len}};
        return content(json{{"object", "list"}, {"data", json::array({m})}}.dump());
      }
      if (get && req.path == "/health") {
        if (ctx.loop->draining()) {
          HttpResponse r = content(R"({"status":"draining"})");
          r.status = 503;
          return r;
        }
        return content(R"({"status":"ok"})");
      }
      if (get && req.path == "/metrics") return content(ctx.metrics->render(), "text/plain; version=0.0.4; charset=utf-8");
      if (get && req.path == "/") return content(std::string(playground_html()), "text/html; charset=utf-8");
    } catch (const std::exception& e) {
      log_error("request failed: {}", e.what());
      return error_response(ApiError{500, e.what(), "server_error", "", ""});
    } catch (...) {
      log_error("request failed: {}", "internal error");
      return error_response(ApiError{500, "internal error", "server_error", "", ""});
    }
    HttpResponse r = error_response(ApiError{404, "no such endpoint", "not_found_error", "", ""});
    return r;
  }
};

HttpServer::HttpServer(const ServerOptions& options, const ServerContext& ctx, ChatPromptFn chat_prompt)
    : impl_(std::make_unique<Impl>()) {
  impl_->opts = options;
  impl_->ctx = ctx;
  impl_->chat_prompt = std::move(chat_prompt);
  HttpTransportOptions t;
  t.host = options.host;
  t.port = options.port;
  t.max_body_bytes = options.max_body_bytes;
  t.max_header_bytes = options.max_header_bytes;
  t.worker_threads = options.http_threads;
  t.max_queued_requests = options.max_queued_http;
  t.max_connections = options.max_connections;
  t.header_timeout = ms(options.header_timeout_s);
  t.body_timeout = ms(options.body_timeout_s);
  t.idle_timeout = ms(options.idle_timeout_s);
  t.write_timeout = ms(options.write_timeout_s);
  Impl* impl = impl_.get();
  impl_->transport = std::make_unique<HttpTransport>(
      std::move(t), [impl](HttpRequest& req) { return impl->route(req); }, transport_error_body,
      [impl](int status) { impl->ctx.metrics->count_http(status); });
}

HttpServer::~HttpServer() = default;

Status HttpServer::bind() { return impl_->transport->bind(); }

int HttpServer::port() const { return impl_->transport->port(); }

bool HttpServer::serve() { return impl_->transport->serve(); }

void HttpServer::stop() { impl_->transport->stop(); }

}  // namespace pagoda

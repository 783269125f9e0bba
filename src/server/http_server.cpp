#include "server/http_server.h"

#include <httplib.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <ctime>

#include "base/log.h"
#include "server/playground.h"

namespace pagoda {

using json = nlohmann::json;

struct HttpServer::Impl {
  ServerOptions opts;
  ServerContext ctx;
  ChatPromptFn chat_prompt;
  httplib::Server svr;
  int bound_port = -1;

  void send_error(httplib::Response& res, const ApiError& e) {
    res.status = e.status;
    if (e.status == 429) res.set_header("Retry-After", "1");
    res.set_content(e.body(), "application/json");
  }

  bool authorized(const httplib::Request& req, httplib::Response& res) {
    if (opts.api_key.empty()) return true;
    const std::string h = req.get_header_value("Authorization");
    if (h == "Bearer " + opts.api_key) return true;
    send_error(res, ApiError{401, h.empty() ? "Missing API key: send 'Authorization: Bearer <key>'" : "Incorrect API key provided",
                             "invalid_request_error", "", "invalid_api_key"});
    return false;
  }

  void completions(const httplib::Request& req, httplib::Response& res, bool chat) {
    if (!authorized(req, res)) return;
    auto parsed = parse_api_request(req.body, chat);
    if (auto* e = std::get_if<ApiError>(&parsed)) return send_error(res, *e);
    ApiRequest r = std::move(std::get<ApiRequest>(parsed));
    std::vector<std::vector<int32_t>> prompts;
    if (chat) {
      auto ids = chat_prompt(r.messages, r.add_generation_prompt);
      if (!ids) return send_error(res, ApiError::bad_request(ids.status().message(), "messages"));
      prompts.push_back(std::move(ids.value()));
    } else {
      for (auto& p : r.prompts) {
        if (auto* text = std::get_if<std::string>(&p)) prompts.push_back(ctx.tokenizer->encode(*text, true, true));
        else prompts.push_back(std::get<std::vector<int32_t>>(p));
      }
    }
    const bool stream = r.stream;
    auto started = CompletionSession::start(ctx, std::move(r), std::move(prompts));
    if (auto* e = std::get_if<ApiError>(&started)) return send_error(res, *e);
    std::shared_ptr<CompletionSession> session = std::move(std::get<std::unique_ptr<CompletionSession>>(started));
    if (!stream) {
      auto body = session->wait_json();
      if (auto* e = std::get_if<ApiError>(&body)) return send_error(res, *e);
      res.set_content(std::get<std::string>(body), "application/json");
      return;
    }
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream",
        [session](size_t, httplib::DataSink& sink) {
          std::string events;
          const bool more = session->next_events(events, std::chrono::milliseconds(100));
          if (!events.empty() && !sink.write(events.data(), events.size())) {
            session->abort();  // the client went away: free its KV blocks now
            return false;
          }
          if (!more) sink.done();
          return true;
        },
        [session](bool success) {
          if (!success) session->abort();
        });
  }

  void routes() {
    svr.set_payload_max_length(opts.max_body_bytes);
    svr.new_task_queue = [n = opts.http_threads] { return new httplib::ThreadPool(static_cast<size_t>(n)); };
    svr.set_keep_alive_max_count(1000);
    svr.set_read_timeout(600);
    svr.set_write_timeout(600);
    svr.Post("/v1/completions", [this](const httplib::Request& q, httplib::Response& r) { completions(q, r, false); });
    svr.Post("/v1/chat/completions", [this](const httplib::Request& q, httplib::Response& r) { completions(q, r, true); });
    svr.Get("/v1/models", [this](const httplib::Request& q, httplib::Response& r) {
      if (!authorized(q, r)) return;
      json m = {{"id", ctx.model_name}, {"object", "model"}, {"created", static_cast<int64_t>(std::time(nullptr))},
                {"owned_by", "pagoda"}, {"root", ctx.model_name}, {"max_model_len", ctx.max_model_len}};
      r.set_content(json{{"object", "list"}, {"data", json::array({m})}}.dump(), "application/json");
    });
    svr.Get("/health", [this](const httplib::Request&, httplib::Response& r) {
      if (ctx.loop->draining()) {
        r.status = 503;
        r.set_content(R"({"status":"draining"})", "application/json");
        return;
      }
      r.set_content(R"({"status":"ok"})", "application/json");
    });
    svr.Get("/metrics", [this](const httplib::Request&, httplib::Response& r) {
      r.set_content(ctx.metrics->render(), "text/plain; version=0.0.4; charset=utf-8");
    });
    svr.Get("/", [](const httplib::Request&, httplib::Response& r) {
      const std::string_view page = playground_html();
      r.set_content(page.data(), page.size(), "text/html; charset=utf-8");
    });
    svr.set_error_handler([this](const httplib::Request&, httplib::Response& r) {
      if (!r.body.empty()) return;
      ApiError e{r.status, r.status == 413 ? "the request body is too large" : fmt::format("HTTP {}", r.status),
                 r.status == 404 ? "not_found_error" : "invalid_request_error", "", ""};
      if (r.status == 404) e.message = "no such endpoint";
      r.set_content(e.body(), "application/json");
    });
    svr.set_exception_handler([](const httplib::Request&, httplib::Response& r, std::exception_ptr ep) {
      std::string what = "internal error";
      try {
        if (ep) std::rethrow_exception(ep);
      } catch (const std::exception& e) {
        what = e.what();
      } catch (...) {
      }
      log_error("request failed: {}", what);
      r.status = 500;
      r.set_content(ApiError{500, what, "server_error", "", ""}.body(), "application/json");
    });
    svr.set_logger([this](const httplib::Request&, const httplib::Response& r) { ctx.metrics->count_http(r.status); });
  }
};

HttpServer::HttpServer(const ServerOptions& options, const ServerContext& ctx, ChatPromptFn chat_prompt)
    : impl_(std::make_unique<Impl>()) {
  impl_->opts = options;
  impl_->ctx = ctx;
  impl_->chat_prompt = std::move(chat_prompt);
  impl_->routes();
}

HttpServer::~HttpServer() = default;

Status HttpServer::bind() {
  if (impl_->opts.port == 0) {
    impl_->bound_port = impl_->svr.bind_to_any_port(impl_->opts.host);
    if (impl_->bound_port < 0) return error("cannot listen on {} (any port)", impl_->opts.host);
    return Status::ok();
  }
  if (!impl_->svr.bind_to_port(impl_->opts.host, impl_->opts.port))
    return error("cannot listen on {}:{} (in use, or not a local address?)", impl_->opts.host, impl_->opts.port);
  impl_->bound_port = impl_->opts.port;
  return Status::ok();
}

int HttpServer::port() const { return impl_->bound_port; }

bool HttpServer::serve() { return impl_->svr.listen_after_bind(); }

void HttpServer::stop() { impl_->svr.stop(); }

}  // namespace pagoda

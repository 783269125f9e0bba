#include "server/http_transport.h"

#include <sys/resource.h>
#include <sys/socket.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <fmt/format.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <deque>
#include <future>
#include <mutex>
#include <optional>
#include <thread>

#include "base/log.h"

namespace pagoda {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using error_code = boost::system::error_code;

std::string HttpRequest::header(std::string_view name) const {
  for (const auto& [k, v] : headers)
    if (beast::iequals(k, beast::string_view(name.data(), name.size()))) return v;
  return {};
}

namespace {

// Fixed threads with a bounded queue: a burst beyond it is refused (503) rather than
// letting requests pile up unboundedly in memory. Idle workers wait on a stack and the
// one that went idle last is woken first, so a steady load runs on as few threads as it
// keeps busy: the others never touch their stacks or grow a malloc thread cache, and
// resident memory tracks the concurrency actually seen instead of creeping up as each of
// the pool's threads is eventually picked once (measured in the soak test).
class WorkerPool {
 public:
  WorkerPool(int n, size_t max_queued) : max_queued_(max_queued) {
    for (int i = 0; i < n; ++i) threads_.emplace_back([this] { run(); });
  }
  ~WorkerPool() { stop(); }
  bool submit(std::function<void()> fn) {
    std::lock_guard lock(mu_);
    if (stopping_ || queue_.size() >= max_queued_) return false;
    queue_.push_back(std::move(fn));
    if (!idle_.empty()) {
      Idle* w = idle_.back();
      idle_.pop_back();
      w->woken = true;
      w->cv.notify_one();
    }
    return true;
  }
  void stop() {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
      queue_.clear();
      for (Idle* w : idle_) w->cv.notify_one();
      idle_.clear();
    }
    for (auto& t : threads_)
      if (t.joinable()) t.join();
  }

 private:
  struct Idle {
    std::condition_variable cv;
    bool woken = false;
  };
  void run() {
    Idle me;
    for (;;) {
      std::function<void()> fn;
      {
        std::unique_lock lock(mu_);
        while (!stopping_ && queue_.empty()) {
          me.woken = false;
          idle_.push_back(&me);
          me.cv.wait(lock, [&] { return me.woken || stopping_; });
        }
        if (stopping_) return;
        fn = std::move(queue_.front());
        queue_.pop_front();
      }
      fn();
    }
  }
  size_t max_queued_;
  std::mutex mu_;
  std::deque<std::function<void()>> queue_;
  std::vector<Idle*> idle_;  // most recently idle at the back
  std::vector<std::thread> threads_;
  bool stopping_ = false;
};

bool is_http_parse_error(const error_code& ec) {
  return &ec.category() == &http::make_error_code(http::error::bad_method).category() && ec != http::error::need_more &&
         ec != http::error::end_of_stream && ec != http::error::partial_message;
}

// The start of a request line, as far as it has arrived: an upper-case method then a
// space. Beast only parses a header once all of it is in, so without this a TLS
// ClientHello or binary noise would sit until the header timeout.
bool plausible_request_start(std::string_view b) {
  size_t i = 0;
  while (i < b.size() && (b[i] == '\r' || b[i] == '\n')) ++i;  // RFC 9112: skip blank lines
  size_t n = 0;
  for (; i < b.size() && n < 20; ++i, ++n) {
    const char c = b[i];
    if (c == ' ') return n > 0;
    if (c < 'A' || c > 'Z') return false;
  }
  return n < 20;
}

}  // namespace

struct HttpTransport::Impl {
  HttpTransportOptions opts;
  Handler handler;
  ErrorBody error_body;
  OnStatus on_status;
  std::atomic<size_t> connections{0};
  std::atomic<bool> stopped{false};
  int bound_port = -1;
  // Destroyed in reverse: the pool first (its queued tasks hold connections), then the
  // acceptor, then the context, whose pending handlers own the remaining connections.
  net::io_context ioc{1};
  tcp::acceptor acceptor{ioc};
  net::steady_timer accept_retry{ioc};
  std::unique_ptr<WorkerPool> workers;

  void accept();
  void refuse(tcp::socket socket);
};

namespace {

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(HttpTransport::Impl* srv, tcp::socket socket) : srv_(srv), stream_(std::move(socket)) {}
  ~Connection() { srv_->connections.fetch_sub(1); }

  void start() { read_request(); }

 private:
  const HttpTransportOptions& opts() const { return srv_->opts; }

  void read_request() {
    parser_.emplace();
    parser_->header_limit(static_cast<uint32_t>(opts().max_header_bytes));
    parser_->body_limit(opts().max_body_bytes);
    // The first request gets the header timeout; later ones also the keep-alive idle wait.
    auto timeout = opts().header_timeout;
    if (served_ > 0 && buffer_.size() == 0) timeout += opts().idle_timeout;
    stream_.expires_after(timeout);
    if (buffer_.size() > 0) return check_start();
    stream_.async_read_some(buffer_.prepare(4096), [self = shared_from_this()](error_code ec, size_t n) {
      if (ec) return self->close();  // idle timeout, hang-up: nothing to answer
      self->buffer_.commit(n);
      self->check_start();
    });
  }

  void check_start() {
    const auto data = buffer_.cdata();
    if (!plausible_request_start({static_cast<const char*>(data.data()), data.size()}))
      return respond_error(400, "malformed HTTP request");
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = shared_from_this()](error_code ec, size_t) { self->on_header(ec); });
  }

  void on_header(error_code ec) {
    if (ec) return read_failed(ec);
    if (parser_->is_done()) return dispatch();
    stream_.expires_after(opts().body_timeout);
    if (beast::iequals(parser_->get()[http::field::expect], "100-continue")) {
      auto cont = std::make_shared<std::string>("HTTP/1.1 100 Continue\r\n\r\n");
      net::async_write(stream_, net::buffer(*cont), [self = shared_from_this(), cont](error_code ec, size_t) {
        if (ec) return self->close();
        self->read_body();
      });
      return;
    }
    read_body();
  }

  void read_body() {
    http::async_read(stream_, buffer_, *parser_, [self = shared_from_this()](error_code ec, size_t) {
      if (ec) return self->read_failed(ec);
      self->dispatch();
    });
  }

  void read_failed(error_code ec) {
    if (ec == http::error::body_limit) return respond_error(413, "the request body is too large");
    if (ec == http::error::header_limit) return respond_error(431, "the request headers are too large");
    if (is_http_parse_error(ec)) return respond_error(400, "malformed HTTP request");
    close();  // timeout, hang-up or reset: nobody to answer
  }

  void dispatch() {
    stream_.expires_never();
    auto& m = parser_->get();
    req_ = std::make_shared<HttpRequest>();
    req_->method = std::string(m.method_string());
    req_->target = std::string(m.target());
    req_->path = req_->target.substr(0, req_->target.find('?'));
    for (const auto& f : m) req_->headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
    req_->body = std::move(m.body());
    keep_alive_ = m.keep_alive();
    version_ = m.version();
    parser_.reset();
    std::weak_ptr<Connection> weak = weak_from_this();
    auto exec = stream_.get_executor();
    req_->on_hangup = [weak, exec](std::function<void()> fn) {
      net::post(exec, [weak, fn = std::move(fn)]() mutable {
        if (auto self = weak.lock()) self->watch_hangup(std::move(fn));
      });
    };
    if (!srv_->workers->submit([self = shared_from_this()] { self->work(); }))
      respond_error(503, "the server is busy; retry later");
  }

  // On the I/O thread. Readable with nothing to read is the client's FIN or a reset;
  // readable with bytes is its next (pipelined) request, which ends the watch.
  void watch_hangup(std::function<void()> fn) {
    if (responding_ || watching_) return;
    watching_ = true;
    const uint64_t gen = ++watch_gen_;
    stream_.socket().async_wait(tcp::socket::wait_read,
                                [self = shared_from_this(), fn = std::move(fn), gen](error_code ec) {
                                  if (gen != self->watch_gen_ || !self->watching_) return;
                                  self->watching_ = false;
                                  if (ec) return;
                                  char c;
                                  const ssize_t r = ::recv(self->stream_.socket().native_handle(), &c, 1,
                                                           MSG_PEEK | MSG_DONTWAIT);
                                  if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) fn();
                                });
  }

  void stop_watching() {
    responding_ = true;
    ++watch_gen_;
    if (watching_) {
      watching_ = false;
      error_code ignored;
      stream_.socket().cancel(ignored);
    }
  }

  // On a worker thread: the route's blocking work.
  void work() {
    HttpResponse res;
    try {
      res = srv_->handler(*req_);
    } catch (const std::exception& e) {
      log_error("request failed: {}", e.what());
      res = HttpResponse{};
      res.status = 500;
      res.body = srv_->error_body(500, e.what());
    }
    if (res.stream) return stream(res);
    auto msg = std::make_shared<http::response<http::string_body>>(static_cast<http::status>(res.status), version_);
    msg->set(http::field::content_type, res.content_type);
    for (const auto& [k, v] : res.headers) msg->set(k, v);
    msg->body() = std::move(res.body);
    msg->keep_alive(keep_alive_);
    msg->prepare_payload();
    const int status = res.status;
    net::post(stream_.get_executor(), [self = shared_from_this(), msg, status] {
      self->stop_watching();
      self->stream_.expires_after(self->opts().write_timeout);
      http::async_write(self->stream_, *msg, [self, msg, status](error_code ec, size_t) {
        self->srv_->on_status(status);
        if (ec) return self->close();
        self->next_request();
      });
    });
  }

  // Writes from a worker: handed to the I/O thread, waited for here.
  bool write_from_worker(std::string data) {
    auto done = std::make_shared<std::promise<bool>>();
    auto fut = done->get_future();
    auto buf = std::make_shared<std::string>(std::move(data));
    net::post(stream_.get_executor(), [self = shared_from_this(), buf, done] {
      self->stream_.expires_after(self->opts().write_timeout);
      net::async_write(self->stream_, net::buffer(*buf),
                       [self, buf, done](error_code ec, size_t) { done->set_value(!ec); });
    });
    // A stopped server never runs the write; don't wait for it forever.
    while (fut.wait_for(std::chrono::milliseconds(100)) != std::future_status::ready)
      if (srv_->stopped.load()) return false;
    return fut.get();
  }

  void stream(HttpResponse& res) {
    std::string head = fmt::format("HTTP/1.1 {} OK\r\nContent-Type: {}\r\nTransfer-Encoding: chunked\r\n", res.status,
                                   res.content_type);
    for (const auto& [k, v] : res.headers) head += fmt::format("{}: {}\r\n", k, v);
    if (!keep_alive_) head += "Connection: close\r\n";
    head += "\r\n";
    srv_->on_status(res.status);
    // No hang-up watch here: the stream notices a gone client at its next write, and
    // on_abort then runs on this thread, the one that reads the stream.
    bool ok = write_from_worker(std::move(head));
    for (bool more = ok; more;) {
      std::string events;
      more = res.stream(events);
      if (!events.empty() && !write_from_worker(fmt::format("{:x}\r\n{}\r\n", events.size(), events))) {
        ok = false;
        break;
      }
    }
    if (ok) ok = write_from_worker("0\r\n\r\n");
    if (!ok && res.on_abort) res.on_abort();  // the client went away: free its KV blocks now
    net::post(stream_.get_executor(), [self = shared_from_this(), ok] {
      self->stop_watching();
      if (!ok) return self->close();
      self->next_request();
    });
  }

  void next_request() {
    ++served_;
    req_.reset();
    responding_ = false;
    if (!keep_alive_) return close();
    read_request();
  }

  // A transport-level error from the I/O thread: the answer, then the connection closes
  // (after a framing error nothing that follows can be trusted).
  void respond_error(int status, const std::string& message) {
    stream_.expires_after(opts().write_timeout < std::chrono::milliseconds(10000) ? opts().write_timeout
                                                                                    : std::chrono::milliseconds(10000));
    auto msg = std::make_shared<http::response<http::string_body>>(static_cast<http::status>(status), 11);
    msg->set(http::field::content_type, "application/json");
    msg->body() = srv_->error_body(status, message);
    if (status == 503) msg->set(http::field::retry_after, "1");
    msg->keep_alive(false);
    msg->prepare_payload();
    http::async_write(stream_, *msg, [self = shared_from_this(), msg, status](error_code ec, size_t) {
      self->srv_->on_status(status);
      if (ec) return self->close();
      self->linger_close();
    });
  }

  // Closing with unread request bytes makes the kernel send a reset, which can destroy
  // the error response before the client reads it; read and drop for a moment first.
  void linger_close() {
    error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.expires_after(std::chrono::milliseconds(1000));
    buffer_.clear();
    stream_.async_read_some(buffer_.prepare(16384), [self = shared_from_this()](error_code ec, size_t) {
      if (ec) return self->close();
      self->linger_close();
    });
  }

  void close() {
    error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.close();
  }

  HttpTransport::Impl* srv_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::shared_ptr<HttpRequest> req_;
  unsigned version_ = 11;
  bool keep_alive_ = true;
  bool watching_ = false;
  bool responding_ = false;
  uint64_t watch_gen_ = 0;
  int64_t served_ = 0;
};

}  // namespace

void HttpTransport::Impl::accept() {
  acceptor.async_accept(net::make_strand(ioc), [this](error_code ec, tcp::socket socket) {
    if (stopped.load()) return;
    if (ec) {
      // Out of descriptors, most likely: back off instead of spinning on the error.
      if (ec != net::error::operation_aborted) log_warn("accept failed: {}", ec.message());
      accept_retry.expires_after(std::chrono::milliseconds(50));
      accept_retry.async_wait([this](error_code e) {
        if (!e && !stopped.load()) accept();
      });
      return;
    }
    if (connections.load() >= opts.max_connections) {
      refuse(std::move(socket));
    } else {
      connections.fetch_add(1);
      std::make_shared<Connection>(this, std::move(socket))->start();
    }
    accept();
  });
}

void HttpTransport::Impl::refuse(tcp::socket socket) {
  auto s = std::make_shared<tcp::socket>(std::move(socket));
  const std::string body = error_body(503, "too many connections; retry later");
  auto text = std::make_shared<std::string>(
      fmt::format("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: {}\r\n"
                  "Retry-After: 1\r\nConnection: close\r\n\r\n{}",
                  body.size(), body));
  // A fresh socket's send buffer takes this at once; no timer needed.
  net::async_write(*s, net::buffer(*text), [this, s, text](error_code, size_t) {
    on_status(503);
    error_code ignored;
    s->shutdown(tcp::socket::shutdown_send, ignored);
    s->close(ignored);
  });
}

HttpTransport::HttpTransport(HttpTransportOptions opts, Handler handler, ErrorBody error_body, OnStatus on_status)
    : impl_(std::make_unique<Impl>()) {
  impl_->opts = std::move(opts);
  impl_->handler = std::move(handler);
  impl_->error_body = std::move(error_body);
  impl_->on_status = std::move(on_status);
}

HttpTransport::~HttpTransport() {
  stop();
  if (impl_->workers) impl_->workers->stop();
}

Status HttpTransport::bind() {
  // Every connection is a descriptor; the soft limit (often 1024) would cap them well
  // below --max-connections.
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  const auto& o = impl_->opts;
  error_code ec;
  auto addr = net::ip::make_address(o.host == "localhost" ? "127.0.0.1" : o.host, ec);
  if (ec) return error("cannot listen on {}:{} (not an address)", o.host, o.port);
  tcp::endpoint ep(addr, static_cast<unsigned short>(o.port));
  auto& a = impl_->acceptor;
  a.open(ep.protocol(), ec);
  if (!ec) a.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) a.bind(ep, ec);
  if (!ec) a.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    error_code ignored;
    a.close(ignored);
    if (o.port == 0) return error("cannot listen on {} (any port)", o.host);
    return error("cannot listen on {}:{} (in use, or not a local address?)", o.host, o.port);
  }
  impl_->bound_port = a.local_endpoint().port();
  return Status::ok();
}

int HttpTransport::port() const { return impl_->bound_port; }

bool HttpTransport::serve() {
  if (!impl_->acceptor.is_open()) return false;
  if (impl_->stopped.load()) return true;  // stopped before it started: a clean stop
  impl_->workers = std::make_unique<WorkerPool>(impl_->opts.worker_threads, impl_->opts.max_queued_requests);
  impl_->accept();
  impl_->ioc.run();
  impl_->workers->stop();
  return true;
}

void HttpTransport::stop() {
  if (impl_->stopped.exchange(true)) return;
  net::post(impl_->ioc, [impl = impl_.get()] {
    error_code ignored;
    impl->acceptor.close(ignored);
    impl->accept_retry.cancel();
  });
  impl_->ioc.stop();
}

}  // namespace pagoda

#include "server/engine_loop.h"

#include "base/log.h"

namespace pagoda {

Status OutputChannel::wait_admitted() {
  std::unique_lock<std::mutex> l(mu_);
  cv_.wait(l, [&] { return state_ != State::kPending; });
  return state_ == State::kRejected ? status_ : Status::ok();
}

bool OutputChannel::take(std::vector<StepOutput>& out, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> l(mu_);
  cv_.wait_for(l, timeout, [&] { return !items_.empty() || state_ == State::kClosed || state_ == State::kRejected; });
  while (!items_.empty()) {
    out.push_back(std::move(items_.front()));
    items_.pop_front();
  }
  return !(state_ == State::kClosed || state_ == State::kRejected) || !out.empty();
}

Status OutputChannel::error() const {
  std::lock_guard<std::mutex> l(mu_);
  return status_;
}

RequestId OutputChannel::id() const {
  std::lock_guard<std::mutex> l(mu_);
  return id_;
}

void OutputChannel::accept(RequestId id) {
  std::lock_guard<std::mutex> l(mu_);
  id_ = id;
  state_ = State::kAccepted;
  cv_.notify_all();
}

void OutputChannel::reject(Status why) {
  std::lock_guard<std::mutex> l(mu_);
  status_ = std::move(why);
  state_ = State::kRejected;
  cv_.notify_all();
}

void OutputChannel::push(StepOutput o) {
  std::lock_guard<std::mutex> l(mu_);
  items_.push_back(std::move(o));
  cv_.notify_all();
}

void OutputChannel::close(Status why) {
  std::lock_guard<std::mutex> l(mu_);
  if (!why.is_ok()) status_ = std::move(why);
  if (state_ != State::kRejected) state_ = State::kClosed;
  cv_.notify_all();
}

EngineLoop::EngineLoop(Engine& engine, Metrics* metrics, const EngineLoopConfig& config)
    : engine_(engine), metrics_(metrics), config_(config) {}

EngineLoop::~EngineLoop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void EngineLoop::start() { thread_ = std::thread([this] { run(); }); }

EngineLoop::Submitted EngineLoop::submit(std::vector<int32_t> prompt, const RequestParams& params) {
  Submitted s;
  std::lock_guard<std::mutex> l(mu_);
  if (draining_ || stop_) {
    s.error = error("the server is shutting down");
    return s;
  }
  if (incoming_.size() + engine_waiting_ >= config_.max_queued) {
    s.overloaded = true;
    s.error = error("too many requests are waiting ({}); retry later", incoming_.size() + engine_waiting_);
    return s;
  }
  s.channel = std::make_shared<OutputChannel>(params.n);
  incoming_.push_back(Pending{std::move(prompt), params, s.channel});
  cv_.notify_all();
  return s;
}

void EngineLoop::abort(const std::shared_ptr<OutputChannel>& ch) {
  {
    std::lock_guard<std::mutex> l(mu_);
    aborts_.push_back(ch);
  }
  cv_.notify_all();
}

void EngineLoop::drain() {
  {
    std::lock_guard<std::mutex> l(mu_);
    draining_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool EngineLoop::draining() const {
  std::lock_guard<std::mutex> l(mu_);
  return draining_;
}

size_t EngineLoop::queued() const {
  std::lock_guard<std::mutex> l(mu_);
  return incoming_.size() + engine_waiting_;
}

void EngineLoop::publish_gauges() {
  const EngineStats st = engine_.stats();
  {
    std::lock_guard<std::mutex> l(mu_);
    engine_waiting_ = st.num_waiting;
  }
  if (metrics_ == nullptr) return;
  EngineGauges g;
  g.running = st.num_running;
  g.waiting = st.num_waiting;
  g.kv_usage = st.kv_usage();
  g.preemptions = st.preemptions;
  g.prefix_queries = st.prefix_query_tokens;
  g.prefix_hits = st.prefix_hit_tokens;
  metrics_->set_engine(g);
}

void EngineLoop::run() {
  std::deque<Pending> incoming;
  std::vector<std::shared_ptr<OutputChannel>> aborts;
  for (;;) {
    {
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait(l, [&] { return stop_ || draining_ || !incoming_.empty() || !aborts_.empty() || engine_.has_work(); });
      if (stop_) break;
      incoming.swap(incoming_);
      aborts.swap(aborts_);
      if (draining_ && incoming.empty() && !engine_.has_work()) break;
    }
    for (Pending& p : incoming) {
      const int64_t prompt_len = static_cast<int64_t>(p.prompt.size());
      auto id = engine_.add_request(std::move(p.prompt), p.params);
      if (!id) {
        p.channel->reject(id.status());
        continue;
      }
      p.channel->accept(*id);
      p.channel->last_token_at.assign(static_cast<size_t>(p.params.n), 0.0);
      live_[*id] = p.channel;
      if (metrics_ != nullptr) metrics_->count_prompt_tokens(prompt_len);
    }
    incoming.clear();
    for (const auto& ch : aborts) {
      const RequestId id = ch->id();
      auto it = live_.find(id);
      if (it == live_.end() || it->second != ch) continue;
      engine_.abort(id);
      live_.erase(it);
      ch->close();
      if (metrics_ != nullptr) metrics_->observe_request(0, 0, 0, "abort");
    }
    aborts.clear();
    if (!engine_.has_work()) {
      publish_gauges();
      continue;
    }
    auto step = engine_.step();
    if (!step) {
      // An engine failure ends every live request with the error (500), never a crash.
      log_error("engine step failed: {}", step.status().message());
      for (auto& [id, ch] : live_) {
        engine_.abort(id);
        ch->close(step.status());
      }
      live_.clear();
      publish_gauges();
      continue;
    }
    for (StepOutput& o : *step) {
      auto it = live_.find(o.request);
      if (it == live_.end()) continue;
      const std::shared_ptr<OutputChannel> ch = it->second;
      if (metrics_ != nullptr && o.token >= 0) {
        metrics_->count_generation_tokens(1);
        const size_t idx = static_cast<size_t>(o.index);
        if (o.output_tokens == 1) metrics_->observe_ttft(o.first_token_time - o.arrival_time);
        else if (idx < ch->last_token_at.size() && ch->last_token_at[idx] > 0)
          metrics_->observe_inter_token(o.token_time - ch->last_token_at[idx]);
        if (idx < ch->last_token_at.size()) ch->last_token_at[idx] = o.token_time;
      }
      const bool finished = o.finish != FinishReason::kNone;
      if (finished && metrics_ != nullptr)
        metrics_->observe_request(o.finish_time - o.arrival_time, o.prompt_tokens, o.output_tokens,
                                  finish_reason_name(o.finish));
      ch->push(std::move(o));
      if (finished && ++ch->finished == ch->n()) {
        ch->close();
        live_.erase(it);
      }
    }
    publish_gauges();
  }
  // Stopped: whatever is still live ends now.
  for (auto& [id, ch] : live_) ch->close(error("the server stopped"));
  live_.clear();
}

}  // namespace pagoda

#include "server/engine_loop.h"

#include <cstdlib>
#include <exception>
#include <optional>
#include <stdexcept>

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

bool OutputChannel::rejected_internally() const {
  std::lock_guard<std::mutex> l(mu_);
  return state_ == State::kRejected && internal_;
}

void OutputChannel::reject(Status why, bool internal) {
  std::lock_guard<std::mutex> l(mu_);
  status_ = std::move(why);
  internal_ = internal;
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
    : engine_(engine), metrics_(metrics), config_(config) {
  if (const char* v = std::getenv("PAGODA_TEST_STEP_THROW")) throw_at_step_ = std::atoll(v);
}

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
  std::vector<std::vector<int32_t>> one;
  one.push_back(std::move(prompt));
  SubmittedAll all = submit_all(std::move(one), params);
  Submitted s;
  if (!all.channels.empty()) s.channel = std::move(all.channels.front());
  s.overloaded = all.overloaded;
  s.error = std::move(all.error);
  return s;
}

EngineLoop::SubmittedAll EngineLoop::submit_all(std::vector<std::vector<int32_t>> prompts, const RequestParams& params) {
  std::vector<RequestParams> each(prompts.size(), params);
  return submit_each(std::move(prompts), std::move(each));
}

EngineLoop::SubmittedAll EngineLoop::submit_each(std::vector<std::vector<int32_t>> prompts,
                                                 std::vector<RequestParams> params) {
  SubmittedAll s;
  if (params.size() != prompts.size()) {
    s.error = error("submit_each: {} prompts but {} parameter sets", prompts.size(), params.size());
    return s;
  }
  std::lock_guard<std::mutex> l(mu_);
  if (draining_ || stop_) {
    s.error = error("the server is shutting down");
    return s;
  }
  if (incoming_.size() + engine_waiting_ + prompts.size() > config_.max_queued) {
    s.overloaded = true;
    s.error = error("too many requests are waiting ({}, limit {}, --max-queued-requests); retry later",
                    incoming_.size() + engine_waiting_, config_.max_queued);
    return s;
  }
  int64_t want = 0;
  for (const RequestParams& p : params) want += p.n;
  if (sequences_ + want > config_.max_sequences) {
    s.overloaded = true;
    s.error = error("the server holds {} sequences and this request needs {} more, over the limit of {} "
                    "(--max-seqs-in-flight); retry later",
                    sequences_, want, config_.max_sequences);
    return s;
  }
  sequences_ += want;
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto ch = std::make_shared<OutputChannel>(params[i].n);
    incoming_.push_back(Pending{std::move(prompts[i]), std::move(params[i]), ch});
    s.channels.push_back(std::move(ch));
  }
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

int64_t EngineLoop::sequences() const {
  std::lock_guard<std::mutex> l(mu_);
  return sequences_;
}

void EngineLoop::release(const OutputChannel& ch) {
  std::lock_guard<std::mutex> l(mu_);
  sequences_ -= ch.n();
}

void EngineLoop::admit(std::deque<Pending>& incoming) {
  for (Pending& p : incoming) {
    const int64_t prompt_len = static_cast<int64_t>(p.prompt.size());
    RequestId added = 0;
    try {
      Result<RequestId> id = engine_.add_request(std::move(p.prompt), p.params);
      if (!id) {
        release(*p.channel);
        p.channel->reject(id.status());
        continue;
      }
      added = *id;
      live_[added] = p.channel;
      p.channel->last_token_at.assign(static_cast<size_t>(p.params.n), 0.0);
      p.channel->accept(added);
      if (metrics_ != nullptr) metrics_->count_prompt_tokens(prompt_len);
    } catch (const std::exception& e) {
      // The request alone is refused; what the engine built of it before the throw goes.
      log_error("admitting a request failed: {}", e.what());
      if (added != 0) {
        live_.erase(added);
        try {
          engine_.abort(added);
        } catch (const std::exception&) {
        }
      }
      release(*p.channel);
      p.channel->reject(error("the server could not admit the request: {}", e.what()), /*internal=*/true);
    }
  }
  incoming.clear();
}

void EngineLoop::fail_live(const Status& why) {
  for (auto& [id, ch] : live_) {
    try {
      engine_.abort(id);
    } catch (const std::exception& e) {
      log_error("dropping request {} after the failure failed too: {}", id, e.what());
    }
    release(*ch);
    ch->close(why);
  }
  live_.clear();
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
  g.kv_blocks = st.num_blocks;
  g.block_size = engine_.config().block_size;
  g.max_num_seqs = engine_.config().scheduler.max_num_seqs;
  g.kv_bytes = engine_.kv_storage().bytes();
  g.spec_drafts = st.spec_drafts;
  g.spec_drafted = st.spec_drafted_tokens;
  g.spec_accepted = st.spec_accepted_tokens;
  g.spec_branch_accepted = st.spec_branch_accepted_tokens;
  g.spec_draft_s = st.spec_draft_seconds;
  const MoeStats& moe = engine_.model().moe_stats();
  if (moe.enabled()) {
    g.experts = moe.n_expert();
    g.experts_used = moe.n_expert_used();
    g.moe_steps = moe.steps();
    g.moe_routing_s = moe.routing_seconds();
    g.moe_forward_s = moe.forward_seconds();
    for (int32_t l = 0; l < moe.n_layer(); ++l) {
      const MoeLayerSummary s = moe.summary(l);
      if (l == 0) g.moe_tokens = s.tokens;
      g.layer_imbalance.push_back(s.imbalance);
      g.layer_active_share.push_back(s.active_share);
    }
  }
  metrics_->set_engine(g);
}

void EngineLoop::run() {
  std::deque<Pending> incoming;
  std::vector<std::shared_ptr<OutputChannel>> aborts;
  publish_gauges();  // the engine's sizes (and an MoE model's expert counts) before any request
  for (;;) {
    {
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait(l, [&] { return stop_ || draining_ || !incoming_.empty() || !aborts_.empty() || engine_.has_work(); });
      if (stop_) break;
      incoming.swap(incoming_);
      aborts.swap(aborts_);
      if (draining_ && incoming.empty() && !engine_.has_work()) break;
    }
    try {
      iterate(incoming, aborts);
    } catch (const std::exception& e) {
      // A backstop: whatever threw outside the guarded calls (handing out outputs, the
      // gauges) ends the live requests, never the process.
      log_error("engine loop failed: {}", e.what());
      incoming.clear();
      aborts.clear();
      fail_live(error("engine loop failed: {}", e.what()));
    }
  }
  // Stopped: whatever is still live ends now.
  fail_live(error("the server stopped"));
}

void EngineLoop::iterate(std::deque<Pending>& incoming, std::vector<std::shared_ptr<OutputChannel>>& aborts) {
  admit(incoming);
  for (const auto& ch : aborts) {
    const RequestId id = ch->id();
    auto it = live_.find(id);
    if (it == live_.end() || it->second != ch) continue;
    try {
      engine_.abort(id);
    } catch (const std::exception& e) {
      log_error("aborting request {} failed: {}", id, e.what());
    }
    live_.erase(it);
    release(*ch);
    ch->close();
    if (metrics_ != nullptr) metrics_->observe_request(0, 0, 0, "abort");
  }
  aborts.clear();
  if (!engine_.has_work()) {
    publish_gauges();
    return;
  }
  // A step that throws (bad_alloc under a memory cap, length_error, ...) is an engine
  // failure like an error Status: its live requests get a 500 and the loop goes on.
  std::optional<Result<std::vector<StepOutput>>> stepped;
  try {
    ++steps_;
    if (steps_ == throw_at_step_) throw std::length_error("PAGODA_TEST_STEP_THROW");
    stepped.emplace(engine_.step());
  } catch (const std::exception& e) {
    stepped.emplace(error("{}", e.what()));
  } catch (...) {
    stepped.emplace(error("unknown exception"));
  }
  Result<std::vector<StepOutput>>& step = *stepped;
  if (!step) {
    log_error("engine step failed: {}", step.status().message());
    fail_live(step.status());
    if (config_.engine_lost && config_.engine_lost()) {
      log_error("the engine cannot run any more steps; the server stops");
      std::lock_guard<std::mutex> l(mu_);
      draining_ = true;
      lost_.store(true);
    }
    publish_gauges();
    return;
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
      if (o.constrained && !o.forced) metrics_->observe_mask(o.mask_seconds);
    }
    const bool finished = o.finish != FinishReason::kNone;
    if (finished && metrics_ != nullptr)
      metrics_->observe_request(o.finish_time - o.arrival_time, o.prompt_tokens, o.output_tokens,
                                finish_reason_name(o.finish));
    ch->push(std::move(o));
    if (finished && ++ch->finished == ch->n()) {
      release(*ch);
      ch->close();
      live_.erase(it);
    }
  }
  publish_gauges();
}

}  // namespace pagoda

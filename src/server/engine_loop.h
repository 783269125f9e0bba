// The engine on its own thread, and the thread-safe doors into it. HTTP handlers submit
// requests into a queue and read each request's outputs from its own channel; the loop
// thread owns the engine: between steps it admits queued requests and aborts, then runs a
// step and hands every output to its channel. A client that goes away aborts its request
// and the engine frees its KV blocks at the next step. drain() stops admitting new work
// and returns once every admitted request has finished (SIGTERM's path).
//
// Nothing thrown on the loop thread ends the process: a throw while admitting a request
// rejects that request (a 500 to its handler), a throw in a step fails every live request
// with the error and the loop goes on serving. The sequences a server holds (queued plus
// running, n per request) are bounded by max_sequences, because each costs memory the KV
// budget does not account for (its tokens, sampler, output processor); past it submit()
// says overloaded (429) rather than queuing.
//
// Test hook: PAGODA_TEST_STEP_THROW=N in the environment makes the N-th step (counted
// from 1) throw std::length_error, so tests can see a failing step become a 500 while the
// server keeps serving. Read once at construction; unset in production.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "engine/engine.h"
#include "server/metrics.h"

namespace pagoda {

// One request's outputs, produced by the loop thread and consumed by one handler.
class OutputChannel {
 public:
  explicit OutputChannel(int32_t n) : n_(n) {}
  enum class State { kPending, kAccepted, kRejected, kClosed };

  // Waits until the engine accepted or rejected the request; the rejection's reason.
  Status wait_admitted();
  // After a rejection: whether it was an internal failure (a throw), not the request's fault.
  bool rejected_internally() const;
  // Moves the available outputs into `out`, waiting up to `timeout` for one. False once
  // the request has finished (or failed) and everything was taken.
  bool take(std::vector<StepOutput>& out, std::chrono::milliseconds timeout);
  // The error that ended the request early (engine failure), if any.
  Status error() const;
  RequestId id() const;

  // Loop side.
  void accept(RequestId id);
  void reject(Status why, bool internal = false);
  void push(StepOutput o);
  void close(Status why = Status::ok());
  int32_t n() const { return n_; }
  int32_t finished = 0;               // loop thread only
  std::vector<double> last_token_at;  // loop thread only: per sample, for inter-token latency

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  State state_ = State::kPending;
  bool internal_ = false;
  Status status_;
  RequestId id_ = 0;
  int32_t n_;
  std::deque<StepOutput> items_;
};

struct EngineLoopConfig {
  size_t max_queued = 512;  // requests waiting for a slot; beyond, submit() says overloaded
  // Sequences (n per prompt) queued or running; beyond, submit() says overloaded.
  int64_t max_sequences = 4096;
  // After a failed step: whether the engine can run no more steps (a model split over
  // processes whose cluster is lost, src/dist). The loop then ends every request, refuses
  // new ones and stops; lost() turns true so the server can exit.
  std::function<bool()> engine_lost;
};

class EngineLoop {
 public:
  EngineLoop(Engine& engine, Metrics* metrics, const EngineLoopConfig& config);
  ~EngineLoop();
  void start();

  // Queues a request. Fails at once (queuing nothing) when the server is draining or the
  // queue is full; Overloaded tells which.
  struct Submitted {
    std::shared_ptr<OutputChannel> channel;
    bool overloaded = false;
    Status error;
  };
  Submitted submit(std::vector<int32_t> prompt, const RequestParams& params);
  // All prompts of one API request (params.n samples each), or none of them: a request is
  // never half queued when the server-wide limits are reached between its prompts.
  struct SubmittedAll {
    std::vector<std::shared_ptr<OutputChannel>> channels;
    bool overloaded = false;
    Status error;
  };
  SubmittedAll submit_all(std::vector<std::vector<int32_t>> prompts, const RequestParams& params);
  // As submit_all, each prompt with its own parameters (params.size() == prompts.size()):
  // a rerank request's pairs differ in where their second text starts.
  SubmittedAll submit_each(std::vector<std::vector<int32_t>> prompts, std::vector<RequestParams> params);
  // The engine's validation of a request (Engine::check_request), from any thread: a
  // handler checks before it submits so that a refused request gets its 400 at once.
  std::optional<RequestRejection> check(std::span<const int32_t> prompt, const RequestParams& params) const {
    return engine_.check_request(prompt, params);
  }
  // Drops the request (no-op once finished).
  void abort(const std::shared_ptr<OutputChannel>& ch);
  // Stops admitting, waits until every admitted request finished, stops the thread.
  void drain();
  bool draining() const;
  // Whether the engine was lost (EngineLoopConfig::engine_lost) and the loop stopped.
  bool lost() const { return lost_.load(); }
  size_t queued() const;
  // Sequences queued or running now (what max_sequences bounds).
  int64_t sequences() const;
  int64_t max_sequences() const { return config_.max_sequences; }

 private:
  void run();
  void publish_gauges();
  // Ends every live request with `why` after the engine failed.
  void fail_live(const Status& why);
  // A request left the server (finished, aborted, failed or rejected): its sequences no
  // longer count against max_sequences.
  void release(const OutputChannel& ch);

  Engine& engine_;
  Metrics* metrics_;
  EngineLoopConfig config_;
  std::thread thread_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  struct Pending {
    std::vector<int32_t> prompt;
    RequestParams params;
    std::shared_ptr<OutputChannel> channel;
  };
  std::deque<Pending> incoming_;
  // Hands the incoming requests to the engine; a throw refuses only the request that threw.
  void admit(std::deque<Pending>& incoming);
  // One turn of the loop after taking the queues: admit, abort, step, hand out outputs.
  void iterate(std::deque<Pending>& incoming, std::vector<std::shared_ptr<OutputChannel>>& aborts);
  std::vector<std::shared_ptr<OutputChannel>> aborts_;
  bool draining_ = false;
  std::atomic<bool> lost_{false};
  bool stop_ = false;
  size_t engine_waiting_ = 0;  // the engine's queue, as of the last step
  int64_t sequences_ = 0;      // queued or running, n per request
  int64_t throw_at_step_ = 0;  // test hook (see above); 0: off
  int64_t steps_ = 0;          // loop thread only
  // Loop thread only.
  std::unordered_map<RequestId, std::shared_ptr<OutputChannel>> live_;
};

}  // namespace pagoda

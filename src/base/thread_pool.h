// The one persistent thread pool. parallel_for owns the work split: kernels hand it a
// range and a body and never compute their own thread partition. The calling thread
// takes part, so a pool of N threads starts N-1 workers. Workers spin briefly before
// sleeping, because the per-token path issues hundreds of short parallel regions.
// Each thread owns a contiguous share and works through it front to back in eight
// chunks (so its weight stream stays one stream for the hardware prefetcher); a thread
// that finishes early takes the remaining chunks of the others, so a core slowed by a
// neighbour or a late wake-up does not hold the whole region. Not reentrant: call
// parallel_for from one thread at a time (the engine loop).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace pagoda {

// A non-owning reference to a callable: what parallel_for takes, so issuing a parallel
// region never allocates (a std::function of a lambda with several captures would).
// The callable must outlive the call, which a region's body always does.
class RangeFn {
 public:
  template <typename F>
  RangeFn(const F& f)  // NOLINT: implicit so lambdas pass straight in
      : obj_(&f), call_([](const void* o, int64_t b, int64_t e, int t) { (*static_cast<const F*>(o))(b, e, t); }) {}
  void operator()(int64_t b, int64_t e, int t) const { call_(obj_, b, e, t); }

 private:
  const void* obj_;
  void (*call_)(const void*, int64_t, int64_t, int);
};

class ThreadPool {
 public:
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }

  // Runs body(begin, end, thread_index) over [0, n) split into contiguous chunks whose
  // boundaries are multiples of `grain` (except the last); a thread may get several
  // chunks, one call each. Returns when all are done. `chunks`: per thread's share
  // (1: a static split, nothing to take over), for bodies with a fixed cost per call.
  static constexpr int kDefaultChunks = 8;
  void parallel_for(int64_t n, int64_t grain, RangeFn body, int chunks = kDefaultChunks);

  // The process-wide pool, created on first use with set_default_threads' value
  // (default: hardware concurrency).
  static ThreadPool& global();
  static void set_default_threads(int n);

 private:
  void worker(int index);
  void run_share(int index);

  // Thread t's share of the current job, in grain blocks: [next, end), claimed
  // chunk_ blocks at a time by t and, once t's own is done, by any thread.
  struct alignas(64) Share {
    std::atomic<int64_t> next{0};
    int64_t end = 0;
  };

  int num_threads_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  bool stop_ = false;
  // The current job, valid while pending_ > 0.
  const RangeFn* body_ = nullptr;
  int64_t n_ = 0;
  int64_t grain_ = 1;
  int64_t chunk_ = 1;
  std::vector<Share> shares_;
};

}  // namespace pagoda

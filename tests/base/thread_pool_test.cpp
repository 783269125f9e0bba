#include "base/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace pagoda {
namespace {

TEST(ThreadPool, CoversEveryIndexExactlyOnce) {
  ThreadPool pool(3);
  for (int64_t n : {1, 2, 7, 64, 1000}) {
    for (int64_t grain : {1, 4, 16}) {
      std::vector<std::atomic<int>> hits(n);
      pool.parallel_for(n, grain, [&](int64_t b, int64_t e, int) {
        for (int64_t i = b; i < e; ++i) hits[i]++;
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "n=" << n << " grain=" << grain;
    }
  }
}

TEST(ThreadPool, ChunkBoundariesAreMultiplesOfGrain) {
  ThreadPool pool(2);
  std::atomic<bool> ok{true};
  pool.parallel_for(100, 8, [&](int64_t b, int64_t e, int) {
    if (b % 8 != 0) ok = false;
    if (e != 100 && e % 8 != 0) ok = false;
  });
  EXPECT_TRUE(ok);
}

TEST(ThreadPool, RunsManySmallRegionsBackToBack) {
  ThreadPool pool(2);
  int64_t total = 0;
  std::vector<int64_t> partial(2);
  for (int rep = 0; rep < 2000; ++rep) {
    partial.assign(2, 0);
    pool.parallel_for(10, 1, [&](int64_t b, int64_t e, int t) { partial[t] += e - b; });
    total += partial[0] + partial[1];
  }
  EXPECT_EQ(total, 20000);
}

// A thread that stalls (a core taken by a neighbour, a late wake-up) leaves the rest of
// its share to the others instead of holding the region.
TEST(ThreadPool, ThreadThatFinishesEarlyTakesTheStalledThreadsChunks) {
  ThreadPool pool(2);
  std::vector<int> by(1000, -1);
  std::atomic<bool> stalled{false};
  pool.parallel_for(1000, 1, [&](int64_t b, int64_t e, int t) {
    if (t == 1 && !stalled.exchange(true)) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    std::this_thread::sleep_for(std::chrono::microseconds(500));  // work enough for the worker to wake
    for (int64_t i = b; i < e; ++i) by[i] = t;
  });
  ASSERT_TRUE(stalled.load()) << "the worker never ran a chunk";
  int64_t taken = 0;
  for (int64_t i = 500; i < 1000; ++i) {
    ASSERT_NE(by[i], -1) << i;
    taken += by[i] == 0;
  }
  // Thread 1 holds its first chunk (an eighth of a share) for 200 ms; thread 0 does the rest.
  EXPECT_GE(taken, 400);
}

// Bodies index per-thread scratch by thread_index: one index is never in two calls at once.
TEST(ThreadPool, ThreadIndexIsNeverInTwoCallsAtOnce) {
  ThreadPool pool(3);
  std::vector<std::atomic<int>> busy(3);
  std::atomic<bool> ok{true};
  for (int rep = 0; rep < 200; ++rep)
    pool.parallel_for(97, 1, [&](int64_t, int64_t, int t) {
      if (busy[t].fetch_add(1) != 0) ok = false;
      busy[t].fetch_sub(1);
    });
  EXPECT_TRUE(ok);
}

}  // namespace
}  // namespace pagoda

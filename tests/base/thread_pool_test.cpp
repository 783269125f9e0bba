#include "base/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
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

}  // namespace
}  // namespace pagoda

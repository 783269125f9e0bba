// Memory read bandwidth of this machine, for the decode roofline of bench/compare_llamacpp.py.
//
//   g++ -O3 -march=native -std=c++17 -pthread bench/bandwidth.cc -o bandwidth
//   ./bandwidth [--threads T] [--mib 1024] [--reps 5] [--json]
//
// T threads (default 2) each sum a contiguous slice of one buffer (default 1 GiB, far
// beyond any last-level cache) with 256-bit loads (AVX2 when compiled with it, else 64-bit
// scalar loads), 8 independent accumulators so the adds never limit the loop. Each thread
// first-touches its own slice, so pages are placed on its node. One untimed warm-up pass,
// then `reps` timed passes; each pass starts all threads together behind a barrier and is
// timed from the barrier to the last thread's end. Prints GB/s (1e9 bytes) per pass and
// the median; --json prints {"threads":..,"bytes":..,"samples_gbps":[..],"median_gbps":..}.
// Built by the script itself (no CMake target): numpy-free, no OpenMP, no dependencies.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace {

using Clock = std::chrono::steady_clock;

// Sums n bytes at p (n a multiple of 256, p 64-byte aligned). The result is returned so the
// compiler cannot drop the loads.
uint64_t sum_slice(const uint8_t* p, size_t n, size_t ahead) {
#if defined(__AVX2__)
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
  for (size_t i = 0; i < n; i += 256) {
    const __m256i* q = reinterpret_cast<const __m256i*>(p + i);
    if (ahead != 0 && i + ahead + 256 <= n)
      for (size_t o = 0; o < 256; o += 64) _mm_prefetch(reinterpret_cast<const char*>(p + i + ahead + o), _MM_HINT_T0);
    a0 = _mm256_add_epi64(a0, _mm256_load_si256(q + 0));
    a1 = _mm256_add_epi64(a1, _mm256_load_si256(q + 1));
    a2 = _mm256_add_epi64(a2, _mm256_load_si256(q + 2));
    a3 = _mm256_add_epi64(a3, _mm256_load_si256(q + 3));
    a4 = _mm256_add_epi64(a4, _mm256_load_si256(q + 4));
    a5 = _mm256_add_epi64(a5, _mm256_load_si256(q + 5));
    a6 = _mm256_add_epi64(a6, _mm256_load_si256(q + 6));
    a7 = _mm256_add_epi64(a7, _mm256_load_si256(q + 7));
  }
  a0 = _mm256_add_epi64(_mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3)),
                        _mm256_add_epi64(_mm256_add_epi64(a4, a5), _mm256_add_epi64(a6, a7)));
  alignas(32) uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), a0);
  return lanes[0] + lanes[1] + lanes[2] + lanes[3];
#else
  (void)ahead;
  const uint64_t* q = reinterpret_cast<const uint64_t*>(p);
  uint64_t a[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (size_t i = 0; i < n / 8; i += 8)
    for (int k = 0; k < 8; ++k) a[k] += q[i + k];
  uint64_t s = 0;
  for (uint64_t v : a) s += v;
  return s;
#endif
}

// A reusable spinning barrier for n threads (std::barrier needs C++20 and
// a newer libstdc++ than we can assume on every peer machine).
class SpinBarrier {
 public:
  explicit SpinBarrier(int n) : n_(n) {}
  void wait() {
    const int gen = gen_.load(std::memory_order_acquire);
    if (count_.fetch_add(1, std::memory_order_acq_rel) + 1 == n_) {
      count_.store(0, std::memory_order_relaxed);
      gen_.fetch_add(1, std::memory_order_acq_rel);
    } else {
      while (gen_.load(std::memory_order_acquire) == gen) std::this_thread::yield();
    }
  }

 private:
  const int n_;
  std::atomic<int> count_{0};
  std::atomic<int> gen_{0};
};

int usage(const char* argv0) {
  std::fprintf(stderr, "usage: %s [--threads T] [--mib MiB] [--reps R] [--prefetch BYTES] [--json]\n", argv0);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2, reps = 5;
  size_t mib = 1024;
  bool json = false;
  size_t prefetch = 4096;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    if (a == "--threads" || a == "-t") {
      const char* v = next();
      if (!v) return usage(argv[0]);
      threads = std::atoi(v);
    } else if (a == "--mib") {
      const char* v = next();
      if (!v) return usage(argv[0]);
      mib = std::strtoull(v, nullptr, 10);
    } else if (a == "--reps" || a == "-r") {
      const char* v = next();
      if (!v) return usage(argv[0]);
      reps = std::atoi(v);
    } else if (a == "--prefetch") {
      const char* v = next();
      if (!v) return usage(argv[0]);
      prefetch = std::strtoull(v, nullptr, 10);
    } else if (a == "--json") {
      json = true;
    } else {
      return usage(argv[0]);
    }
  }
  if (threads < 1 || reps < 1 || mib < 1) return usage(argv[0]);

  // Each slice is a multiple of 4 KiB (so of the 256-byte loop step).
  const size_t bytes = mib << 20;
  const size_t slice = (bytes / threads) & ~size_t{4095};
  const size_t total = slice * threads;
  if (slice == 0) return usage(argv[0]);
  uint8_t* buf = static_cast<uint8_t*>(std::aligned_alloc(4096, total));
  if (buf == nullptr) {
    std::fprintf(stderr, "error: cannot allocate %zu bytes\n", total);
    return 1;
  }

  // The main thread is worker 0 (a spinning coordinator would steal a core from the
  // workers on a small machine); threads 1..T-1 are spawned.
  SpinBarrier start(threads), done(threads);
  std::atomic<bool> quit{false};
  std::atomic<size_t> ahead{0};  // the pass's software prefetch distance (0: none)
  std::vector<uint64_t> sink(threads * 8, 0);  // one cache line per thread
  auto touch = [&](int t) {
    uint8_t* mine = buf + t * slice;
    for (size_t i = 0; i < slice; ++i) mine[i] = static_cast<uint8_t>(i * 131 + t);  // first touch
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) {
    pool.emplace_back([&, t] {
      touch(t);
      done.wait();
      for (;;) {
        start.wait();
        if (quit.load()) return;
        sink[t * 8] += sum_slice(buf + t * slice, slice, ahead.load());
        done.wait();
      }
    });
  }
  touch(0);
  done.wait();  // buffer initialised

  auto pass = [&](size_t a) -> double {
    ahead.store(a);
    start.wait();
    const auto t0 = Clock::now();
    sink[0] += sum_slice(buf, slice, a);
    done.wait();
    return std::chrono::duration<double>(Clock::now() - t0).count();
  };
  pass(0);  // warm-up
  // Every rep times a pass of plain loads and one that also prefetches `prefetch` bytes
  // ahead: which reads faster depends on the machine (the hardware prefetcher stops at
  // page boundaries), and the roofline wants the best the memory can give.
  std::vector<double> plain, fetched;
  for (int r = 0; r < reps; ++r) {
    plain.push_back(static_cast<double>(total) / pass(0) / 1e9);
    if (prefetch > 0) fetched.push_back(static_cast<double>(total) / pass(prefetch) / 1e9);
  }
  quit.store(true);
  start.wait();
  for (auto& th : pool) th.join();

  uint64_t check = 0;
  for (uint64_t v : sink) check += v;
  auto median_of = [](std::vector<double> v) {
    if (v.empty()) return 0.0;
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  };
  const double plain_median = median_of(plain), fetched_median = median_of(fetched);
  const bool use_fetched = fetched_median > plain_median;
  const std::vector<double>& gbps = use_fetched ? fetched : plain;
  const double median = use_fetched ? fetched_median : plain_median;
#if defined(__AVX2__)
  const char* isa = "avx2";
#else
  const char* isa = "scalar";
#endif
  if (json) {
    std::printf("{\"threads\": %d, \"bytes\": %zu, \"isa\": \"%s\", \"samples_gbps\": [", threads, total, isa);
    for (size_t i = 0; i < gbps.size(); ++i) std::printf("%s%.3f", i ? ", " : "", gbps[i]);
    std::printf("], \"median_gbps\": %.3f, \"plain_median_gbps\": %.3f, \"prefetch_median_gbps\": %.3f, "
                "\"prefetch_bytes\": %zu, \"checksum\": %llu}\n",
                median, plain_median, fetched_median, prefetch, static_cast<unsigned long long>(check));
  } else {
    std::printf("read bandwidth, %d threads, %.0f MiB, %s loads:", threads, total / 1048576.0, isa);
    for (double g : gbps) std::printf(" %.2f", g);
    std::printf(" GB/s; median %.2f GB/s (plain loads %.2f, prefetching %zu bytes ahead %.2f)\n", median,
                plain_median, prefetch, fetched_median);
  }
  std::free(buf);
  return 0;
}

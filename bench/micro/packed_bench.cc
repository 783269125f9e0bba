// Packed-panel kernels (src/kernels/matmul/packed_weights.h) against the row-major ones they
// replace, single thread, AVX-512 only:
//   packed_gemv/<type>/<rows>x<cols>      one token; bytes_per_second counts weight bytes
//                                         (compare gemv_rows/<type>/avx512/<rows>x<cols>);
//   packed_tile/<type>/<rows>x<cols>/T    T tokens; GFLOPS = 2 * rows * cols * T
//   packed_tile_{vnni,amx}/<type>/8960x1536/T   the two tile bodies side by side
//                                         (compare lq_tile*/<type>/avx512).
// Run e.g. bin/pagoda-microbench --benchmark_filter='packed_|gemv_rows/Q4_0/avx512'
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/matmul/dot_kernels.h"
#include "kernels/matmul/packed_weights.h"
#include "quant/formats.h"
#include "bench_data.h"

namespace pagoda {
namespace {

using bench::random_floats;
using bench::random_weights;

struct Packed {
  uint8_t* p = nullptr;
  explicit Packed(size_t n) : p(static_cast<uint8_t*>(std::aligned_alloc(64, (n + 63) / 64 * 64))) {}
  ~Packed() { std::free(p); }
  Packed(const Packed&) = delete;
  Packed& operator=(const Packed&) = delete;
};

void bm_packed(benchmark::State& state, const PackedKernels* k, DType t, int64_t rows, int64_t cols, int64_t tokens) {
  const std::vector<uint8_t> w = random_weights(t, rows, cols);
  const size_t rb = row_bytes(t, cols);
  Packed pk(packed_bytes(t, rows, cols));
  pack_panels(t, w.data(), rb, rows, cols, 0, (rows + kPanelRows - 1) / kPanelRows, pk.p);
  const DType xt = vec_dot_type(t);
  const size_t xb = row_bytes(xt, cols);
  std::vector<uint8_t> x(xb * static_cast<size_t>(tokens));
  for (int64_t i = 0; i < tokens; ++i)
    quantize_activation_row(xt, random_floats(cols, 100 + static_cast<uint32_t>(i)).data(), x.data() + i * xb, cols);
  std::vector<float> y(static_cast<size_t>(rows * tokens));
  for (auto _ : state) {
    if (tokens == 1) {
      k->gemv(cols, pk.p, rows, x.data(), y.data());
    } else {
      for (int64_t t0 = 0; t0 < tokens; t0 += 64)
        k->tile(cols, pk.p, rows, x.data() + t0 * xb, xb, std::min<int64_t>(64, tokens - t0), y.data() + t0 * rows,
                static_cast<size_t>(rows));
    }
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(rb * rows));
  state.counters["GFLOPS"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * 2.0 * rows * cols * tokens / 1e9, benchmark::Counter::kIsRate);
}

const bool registered = [] {
  for (DType t : {DType::Q4_0, DType::Q5_0, DType::Q8_0, DType::Q4_K, DType::Q6_K}) {
    if (packed_kernels_avx512(t) == nullptr) continue;
    const std::string name(dtype_name(t));
    struct Shape {
      int64_t rows, cols;
    };
    const int64_t block = dtype_info(t).block_size;
    for (Shape s : {Shape{2048, 2048}, Shape{5632, 2048}, Shape{32768, 2048}, Shape{262144, 640}, Shape{151936, 1536}})
      if (s.cols % block == 0)
        benchmark::RegisterBenchmark(
          ("packed_gemv/" + name + "/" + std::to_string(s.rows) + "x" + std::to_string(s.cols)).c_str(), bm_packed,
          packed_kernels_avx512(t), t, s.rows, s.cols, int64_t{1})
          ->Unit(benchmark::kMicrosecond);
    for (Shape s : {Shape{1024, 4096}, Shape{16384, 640}, Shape{262144, 640}})
      for (int64_t tokens : {16, 48, 64}) {
        if ((s.rows == 1024 && tokens != 64) || s.cols % block != 0) continue;
        benchmark::RegisterBenchmark(("packed_tile/" + name + "/" + std::to_string(s.rows) + "x" +
                                      std::to_string(s.cols) + "/" + std::to_string(tokens))
                                         .c_str(),
                                     bm_packed, packed_kernels_avx512(t), t, s.rows, s.cols, tokens)
            ->Unit(benchmark::kMillisecond);
      }
    // Few tokens on a Qwen2.5-1.5B FFN matrix (speculative verification, batched decode):
    // the VNNI tile and, where the CPU has it, the AMX one.
    for (const auto& [kind, k] : {std::pair{std::string("vnni"), packed_kernels_avx512(t)},
                                  std::pair{std::string("amx"), packed_kernels_amx(t)}}) {
      if (k == nullptr || 1536 % block != 0) continue;
      for (int64_t tokens : {2, 4, 6, 8, 16, 32, 64})
        benchmark::RegisterBenchmark(
            ("packed_tile_" + kind + "/" + name + "/8960x1536/" + std::to_string(tokens)).c_str(), bm_packed, k, t,
            int64_t{8960}, int64_t{1536}, tokens)
            ->Unit(benchmark::kMicrosecond);
    }
  }
  return true;
}();

}  // namespace
}  // namespace pagoda

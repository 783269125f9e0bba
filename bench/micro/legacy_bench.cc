// Legacy-format kernels (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) per SIMD target, single thread:
//   lq_dot/<type>/<target>        a 4096 x 4096 weight matrix (fits in a big L3) times one
//                                 activation row, row by row through DotKernels::dot;
//                                 bytes_per_second counts weight bytes read.
//   lq_dot_dram/<type>/<target>   the same over 262144 x 640 (Gemma 3's tied output
//                                 matrix, far beyond the caches): decode's real regime.
//   lq_tile/<type>/<target>       1024 x 4096 weights times 64 activation rows through
//                                 DotKernels::tile; GFLOPS = 2 * rows * cols * 64.
//   lq_tile640/<type>/<target>    2048 x 640 (a Gemma 3 270M FFN matrix) times 64 rows.
//   lq_tile_dram/<type>/<target>/T  262144 x 640 times T rows: batched decode's logits,
//                                 where each weight byte comes from DRAM for few tokens.
//   lq_quantize_x/<target>        4096 floats to Q8_0.
// Run e.g. bin/pagoda-microbench --benchmark_filter=lq_
#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/matmul/dot_kernels.h"
#include "quant/formats.h"
#include "bench_data.h"

namespace pagoda {
namespace {

using bench::random_floats;
using bench::random_weights;

constexpr int64_t kTokens = 64;

std::vector<uint8_t> activations(DType t, int64_t tokens, int64_t cols) {
  const DType xt = vec_dot_type(t);
  const size_t xb = row_bytes(xt, cols);
  std::vector<uint8_t> x(xb * tokens);
  for (int64_t k = 0; k < tokens; ++k)
    quantize_activation_row(xt, random_floats(cols, 100 + static_cast<uint32_t>(k)).data(), x.data() + k * xb, cols);
  return x;
}

void bm_dot(benchmark::State& state, DType t, SimdTarget target, int64_t rows, int64_t cols) {
  const DotKernels k = dot_kernels(t, target);
  const std::vector<uint8_t> w = random_weights(t, rows, cols);
  const std::vector<uint8_t> x = activations(t, 1, cols);
  const size_t rb = row_bytes(t, cols);
  std::vector<float> y(rows);
  for (auto _ : state) {
    for (int64_t r = 0; r < rows; ++r) y[r] = k.dot(cols, w.data() + r * rb, x.data());
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(rb * rows));
}

void bm_tile(benchmark::State& state, DType t, SimdTarget target, int64_t rows, int64_t cols, int64_t tokens) {
  const DotKernels k = dot_kernels(t, target);
  if (target == SimdTarget::kScalar) rows = 64;
  const std::vector<uint8_t> w = random_weights(t, rows, cols);
  const std::vector<uint8_t> x = activations(t, tokens, cols);
  const size_t rb = row_bytes(t, cols);
  const size_t xb = row_bytes(vec_dot_type(t), cols);
  std::vector<float> y(rows * tokens);
  for (auto _ : state) {
    k.tile(cols, w.data(), rb, rows, x.data(), xb, tokens, y.data(), rows);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.counters["GFLOPS"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * 2.0 * rows * cols * tokens / 1e9, benchmark::Counter::kIsRate);
}

void bm_quantize_x(benchmark::State& state, SimdTarget target) {
  const DotKernels k = dot_kernels(DType::Q8_0, target);
  const int64_t cols = 4096;
  const std::vector<float> f = random_floats(cols, 5);
  std::vector<uint8_t> x(row_bytes(DType::Q8_0, cols));
  for (auto _ : state) {
    k.quantize_x(f.data(), x.data(), cols);
    benchmark::DoNotOptimize(x.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * cols * 4);
}

const bool registered = [] {
  for (SimdTarget target : runnable_simd_targets()) {
    const std::string tn = simd_target_name(target);
    for (DType t : {DType::Q8_0, DType::Q4_0, DType::Q5_0, DType::Q4_1, DType::Q5_1}) {
      const std::string name(dtype_name(t));
      benchmark::RegisterBenchmark(("lq_dot/" + name + "/" + tn).c_str(), bm_dot, t, target, 4096, 4096)
          ->Unit(benchmark::kMicrosecond);
      if (target != SimdTarget::kScalar)
        benchmark::RegisterBenchmark(("lq_dot_dram/" + name + "/" + tn).c_str(), bm_dot, t, target, 262144, 640)
            ->Unit(benchmark::kMillisecond);
      benchmark::RegisterBenchmark(("lq_tile/" + name + "/" + tn).c_str(), bm_tile, t, target, 1024, 4096, kTokens)
          ->Unit(benchmark::kMillisecond);
      benchmark::RegisterBenchmark(("lq_tile640/" + name + "/" + tn).c_str(), bm_tile, t, target, 2048, 640, kTokens)
          ->Unit(benchmark::kMillisecond);
      if (target != SimdTarget::kScalar)
        for (int64_t tokens : {16, 48}) {
          benchmark::RegisterBenchmark(("lq_tile_dram/" + name + "/" + tn + "/" + std::to_string(tokens)).c_str(),
                                       bm_tile, t, target, 262144, 640, tokens)
              ->Unit(benchmark::kMillisecond);
          benchmark::RegisterBenchmark(("lq_tile_l3/" + name + "/" + tn + "/" + std::to_string(tokens)).c_str(),
                                       bm_tile, t, target, 16384, 640, tokens)
              ->Unit(benchmark::kMillisecond);
        }
    }
    benchmark::RegisterBenchmark(("lq_quantize_x/" + tn).c_str(), bm_quantize_x, target)->Unit(benchmark::kMicrosecond);
  }
  return true;
}();

}  // namespace
}  // namespace pagoda

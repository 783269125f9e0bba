// Decode's GEMV per format and SIMD target, single thread, on a 1B model's shapes
// (2048 x 2048 attention, 5632 x 2048 FFN, 32768 x 2048 about the output matrix), and
// Gemma 3 270M's output matrix, 262144 x 640:
//   gemv_dot/<type>/<target>/<rows>x<cols>   row by row through DotKernels::dot (before
//                                            dot_rows, decode's only path);
//   gemv_rows/<type>/<target>/<rows>x<cols>  through DotKernels::dot_rows in ranges of 16
//                                            rows, as matmul hands them to a thread.
// bytes_per_second counts the weight bytes read. Run e.g.
// bin/pagoda-microbench --benchmark_filter=gemv_
#include <benchmark/benchmark.h>

#include <algorithm>
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

void bm_gemv(benchmark::State& state, DType t, SimdTarget target, int64_t rows, int64_t cols, bool use_rows) {
  const DotKernels k = dot_kernels(t, target);
  const std::vector<uint8_t> w = random_weights(t, rows, cols);
  std::vector<uint8_t> x(row_bytes(vec_dot_type(t), cols));
  k.quantize_x(random_floats(cols, 100).data(), x.data(), cols);
  const size_t rb = row_bytes(t, cols);
  std::vector<float> y(rows);
  constexpr int64_t kGrain = 16;  // matmul's rows per work item
  for (auto _ : state) {
    if (use_rows) {
      for (int64_t r = 0; r < rows; r += kGrain)
        k.dot_rows(cols, w.data() + r * rb, rb, std::min(kGrain, rows - r), x.data(), y.data() + r);
    } else {
      for (int64_t r = 0; r < rows; ++r) y[r] = k.dot(cols, w.data() + r * rb, x.data());
    }
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(w.size()));
}

const bool registered = [] {
  for (SimdTarget target : runnable_simd_targets()) {
    if (target == SimdTarget::kScalar) continue;
    const std::string tn = simd_target_name(target);
    for (DType t : {DType::Q4_0, DType::Q8_0, DType::Q4_K, DType::Q6_K, DType::Q4_1, DType::Q5_0}) {
      // 32768 rows: 36 MB as Q4_0, beyond L3 (decode's real regime, as the model streams
      // 460 MB per token).
      for (int64_t rows : {2048, 5632, 32768}) {
        const std::string suffix = std::string(dtype_name(t)) + "/" + tn + "/" + std::to_string(rows) + "x2048";
        for (bool use_rows : {false, true})
          benchmark::RegisterBenchmark(((use_rows ? "gemv_rows/" : "gemv_dot/") + suffix).c_str(), bm_gemv, t,
                                       target, rows, 2048, use_rows)
              ->Unit(benchmark::kMicrosecond);
      }
      // Gemma 3 270M's tied output matrix (short rows, 170 MB as Q8_0); 640 values are
      // not a whole number of K-quant super-blocks.
      if (dtype_info(t).block_size == 32)
        for (bool use_rows : {false, true})
          benchmark::RegisterBenchmark(
              ((use_rows ? "gemv_rows/" : "gemv_dot/") + std::string(dtype_name(t)) + "/" + tn + "/262144x640").c_str(),
              bm_gemv, t, target, 262144, 640, use_rows)
              ->Unit(benchmark::kMillisecond);
      // Qwen2.5-Coder 1.5B's output matrix (Q6_K in its Q4_K_M file, 191 MB).
      if (t == DType::Q6_K)
        for (bool use_rows : {false, true})
          benchmark::RegisterBenchmark(
              ((use_rows ? "gemv_rows/" : "gemv_dot/") + std::string(dtype_name(t)) + "/" + tn + "/151936x1536").c_str(),
              bm_gemv, t, target, 151936, 1536, use_rows)
              ->Unit(benchmark::kMillisecond);
    }
  }
  return true;
}();

}  // namespace
}  // namespace pagoda

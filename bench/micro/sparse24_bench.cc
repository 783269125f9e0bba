// 2:4 sparse kernels against their dense formats, single thread, weight bytes per second:
//   s24_gemv/<type>/<target>       2048 x 2048 (in cache) times one activation row, through
//                                  DotKernels::dot_rows in 16-row items as matmul's decode
//                                  calls it (gemv_by_rows) or dot per row otherwise.
//   s24_gemv_dram/<type>/<target>  16384 x 4096 (far beyond the caches): decode's regime.
//   s24_expand/<type>/<target>     expand_row over 2048 x 2048 (prefill's expansion).
// Types: Q8_0_S24 and Q4_0_S24 beside Q8_0 and Q4_0 (unpacked rows, their dot).
// Run e.g. bin/pagoda-microbench --benchmark_filter=s24_
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "bench_data.h"
#include "kernels/matmul/dot_kernels.h"
#include "quant/formats.h"

namespace pagoda {
namespace {

void bm_gemv(benchmark::State& state, DType t, SimdTarget target, int64_t rows, int64_t cols) {
  const DotKernels k = dot_kernels(t, target);
  const std::vector<uint8_t> w = bench::random_weights(t, rows, cols);
  std::vector<uint8_t> x(row_bytes(DType::Q8_0, cols));
  quantize_activation_row(DType::Q8_0, bench::random_floats(cols, 3).data(), x.data(), cols);
  const size_t rb = row_bytes(t, cols);
  std::vector<float> y(rows);
  for (auto _ : state) {
    for (int64_t r0 = 0; r0 < rows; r0 += 16) {
      if (k.gemv_by_rows) k.dot_rows(cols, w.data() + r0 * rb, rb, 16, x.data(), y.data() + r0);
      else
        for (int64_t r = r0; r < r0 + 16; ++r) y[r] = k.dot(cols, w.data() + r * rb, x.data());
    }
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(rb * rows));
}

void bm_expand(benchmark::State& state, DType t, SimdTarget target) {
  const DotKernels k = dot_kernels(t, target);
  const int64_t rows = 2048, cols = 2048;
  const std::vector<uint8_t> w = bench::random_weights(t, rows, cols);
  std::vector<uint8_t> e(row_bytes(k.expanded, cols) * rows);
  const size_t rb = row_bytes(t, cols), eb = row_bytes(k.expanded, cols);
  for (auto _ : state) {
    for (int64_t r = 0; r < rows; ++r) k.expand_row(w.data() + r * rb, e.data() + r * eb, cols);
    benchmark::DoNotOptimize(e.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(rb * rows));
}

const bool registered = [] {
  for (SimdTarget target : runnable_simd_targets()) {
    if (target == SimdTarget::kScalar) continue;
    const std::string tn = simd_target_name(target);
    for (DType t : {DType::Q8_0_S24, DType::Q8_0, DType::Q4_0_S24, DType::Q4_0}) {
      const std::string name(dtype_name(t));
      benchmark::RegisterBenchmark(("s24_gemv/" + name + "/" + tn).c_str(), bm_gemv, t, target, 2048, 2048)
          ->Unit(benchmark::kMicrosecond);
      benchmark::RegisterBenchmark(("s24_gemv_dram/" + name + "/" + tn).c_str(), bm_gemv, t, target, 16384, 4096)
          ->Unit(benchmark::kMillisecond);
      if (t == DType::Q8_0_S24 || t == DType::Q4_0_S24)
        benchmark::RegisterBenchmark(("s24_expand/" + name + "/" + tn).c_str(), bm_expand, t, target)
            ->Unit(benchmark::kMicrosecond);
    }
  }
  return true;
}();

}  // namespace
}  // namespace pagoda

// Float-format kernels (F32, F16, BF16) per SIMD target, single thread:
//   flt_dot/<type>/<target>     a 2048 x 2048 weight matrix times one activation row, row
//                               by row through DotKernels::dot; bytes_per_second counts
//                               weight bytes read (decode streams them once).
//   flt_dot_big/<type>/<target> 5632 x 2048 (a 1B model's FFN matrix, 23 MB as F16):
//                               beyond L2, mostly from L3/DRAM.
//   flt_dot_dram/<type>/<target> 65536 x 2048 (256 MB as F16): DRAM bandwidth, decode's
//                               real regime.
//   flt_tile/<type>/<target>    512 x 2048 weights times 64 activation rows through
//                               DotKernels::tile; GFLOPS = 2 * rows * cols * 64.
//   flt_tile5632/<type>/<target> 256 x 5632 (an FFN down matrix) times 64 rows.
//   flt_quantize_x/<type>/<target> 4096 floats to the vec-dot type.
// Run e.g. bin/pagoda-microbench --benchmark_filter=flt_
#include <benchmark/benchmark.h>

#include <random>
#include <string>
#include <vector>

#include "kernels/matmul/dot_kernels.h"
#include "quant/formats.h"
#include "bench_data.h"

namespace pagoda {
namespace {

using bench::random_floats;

constexpr int64_t kTokens = 64;

std::vector<uint8_t> encode(DType t, int64_t rows, int64_t cols, uint32_t seed, bool activation) {
  const DType et = activation ? vec_dot_type(t) : t;
  const size_t rb = row_bytes(et, cols);
  const std::vector<float> f = random_floats(cols, seed);
  std::vector<uint8_t> out(rb * rows);
  for (int64_t r = 0; r < rows; ++r) {
    if (activation) quantize_activation_row(et, f.data(), out.data() + r * rb, cols);
    else quantize_row(et, f.data(), out.data() + r * rb, cols);
  }
  return out;
}

void bm_dot(benchmark::State& state, DType t, SimdTarget target, int64_t rows, int64_t cols) {
  const DotKernels k = dot_kernels(t, target);
  const std::vector<uint8_t> w = encode(t, rows, cols, 1, false);
  const std::vector<uint8_t> x = encode(t, 1, cols, 2, true);
  std::vector<float> y(rows);
  const size_t rb = row_bytes(t, cols);
  for (auto _ : state) {
    for (int64_t r = 0; r < rows; ++r) y[r] = k.dot(cols, w.data() + r * rb, x.data());
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(w.size()));
}

void bm_tile(benchmark::State& state, DType t, SimdTarget target, int64_t rows, int64_t cols) {
  const DotKernels k = dot_kernels(t, target);
  const std::vector<uint8_t> w = encode(t, rows, cols, 1, false);
  const std::vector<uint8_t> x = encode(t, kTokens, cols, 2, true);
  std::vector<float> y(rows * kTokens);
  const size_t rb = row_bytes(t, cols), xb = row_bytes(vec_dot_type(t), cols);
  for (auto _ : state) {
    k.tile(cols, w.data(), rb, rows, x.data(), xb, kTokens, y.data(), static_cast<size_t>(rows));
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["GFLOPS"] = benchmark::Counter(static_cast<double>(state.iterations()) * 2.0 * rows * cols * kTokens,
                                                benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}

void bm_quantize_x(benchmark::State& state, DType t, SimdTarget target) {
  const DotKernels k = dot_kernels(t, target);
  const std::vector<float> f = random_floats(4096, 5);
  std::vector<uint8_t> out(row_bytes(vec_dot_type(t), 4096));
  for (auto _ : state) {
    k.quantize_x(f.data(), out.data(), 4096);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * 4096);
}

int register_all() {
  for (DType t : {DType::F32, DType::F16, DType::BF16}) {
    for (SimdTarget s : runnable_simd_targets()) {
      const std::string suffix = std::string(dtype_name(t)) + "/" + simd_target_name(s);
      benchmark::RegisterBenchmark(("flt_dot/" + suffix).c_str(), bm_dot, t, s, 2048, 2048);
      benchmark::RegisterBenchmark(("flt_dot_big/" + suffix).c_str(), bm_dot, t, s, 5632, 2048);
      if (s != SimdTarget::kScalar)
        benchmark::RegisterBenchmark(("flt_dot_dram/" + suffix).c_str(), bm_dot, t, s, 65536, 2048);
      if (s != SimdTarget::kScalar) {
        benchmark::RegisterBenchmark(("flt_tile/" + suffix).c_str(), bm_tile, t, s, 512, 2048);
        benchmark::RegisterBenchmark(("flt_tile5632/" + suffix).c_str(), bm_tile, t, s, 256, 5632);
      }
      benchmark::RegisterBenchmark(("flt_quantize_x/" + suffix).c_str(), bm_quantize_x, t, s);
    }
  }
  return 0;
}

const int kRegistered = register_all();

}  // namespace
}  // namespace pagoda

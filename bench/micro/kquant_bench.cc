// K-quant kernels per SIMD target, single thread:
//   kq_dot/<type>/<target>   a 4096 x 4096 weight matrix times one activation row, row by
//                            row through DotKernels::dot (decode's GEMV); bytes_per_second
//                            counts weight bytes read. 9-13 MB: from L3 on big-cache parts.
//   kq_dot_l2/...            the same over 256 rows, which stay in L2: the kernel's own
//                            throughput, without the memory system.
//   kq_tile/<type>/<target>  rows x 4096 weights times 64 activation rows through
//                            DotKernels::tile in one call; GFLOPS = 2 * rows * 4096 * 64.
//   kq_quantize_x/<target>   4096 floats to Q8_K.
// Run e.g. bin/pagoda-microbench --benchmark_filter=kq_
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

constexpr int64_t kCols = 4096;
constexpr int64_t kDotRows = 4096;
constexpr int64_t kDotRowsL2 = 256;  // 0.6-0.8 MB of weights: the kernel's own speed, no DRAM
constexpr int64_t kTokens = 64;

std::vector<uint8_t> random_weights(DType t, int64_t rows) {
  const size_t rb = row_bytes(t, kCols);
  std::vector<uint8_t> w(rb * rows);
  const std::vector<float> f = random_floats(kCols, 1);
  std::vector<uint8_t> row(rb);
  quantize_row(t, f.data(), row.data(), kCols);
  // Quantizing every row is slow for big matrices; rotate copies of a few rows instead
  // (the kernels' speed does not depend on the values).
  for (int64_t r = 0; r < rows; ++r) std::memcpy(w.data() + r * rb, row.data(), rb);
  return w;
}

std::vector<uint8_t> activations(DType t, int64_t tokens) {
  const DType xt = vec_dot_type(t);
  const size_t xb = row_bytes(xt, kCols);
  std::vector<uint8_t> x(xb * tokens);
  for (int64_t k = 0; k < tokens; ++k) {
    const std::vector<float> f = random_floats(kCols, 100 + static_cast<uint32_t>(k));
    quantize_activation_row(xt, f.data(), x.data() + k * xb, kCols);
  }
  return x;
}

void bm_dot(benchmark::State& state, DType t, SimdTarget target, int64_t rows) {
  const DotKernels k = dot_kernels(t, target);
  const std::vector<uint8_t> w = random_weights(t, rows);
  const std::vector<uint8_t> x = activations(t, 1);
  const size_t rb = row_bytes(t, kCols);
  std::vector<float> y(rows);
  for (auto _ : state) {
    for (int64_t r = 0; r < rows; ++r) y[r] = k.dot(kCols, w.data() + r * rb, x.data());
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(rb * rows));
}

void bm_tile(benchmark::State& state, DType t, SimdTarget target) {
  const DotKernels k = dot_kernels(t, target);
  const int64_t rows = target == SimdTarget::kScalar ? 64 : 1024;
  const std::vector<uint8_t> w = random_weights(t, rows);
  const std::vector<uint8_t> x = activations(t, kTokens);
  const size_t rb = row_bytes(t, kCols);
  const size_t xb = row_bytes(vec_dot_type(t), kCols);
  std::vector<float> y(rows * kTokens);
  for (auto _ : state) {
    k.tile(kCols, w.data(), rb, rows, x.data(), xb, kTokens, y.data(), rows);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.counters["GFLOPS"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * 2.0 * rows * kCols * kTokens / 1e9, benchmark::Counter::kIsRate);
}

void bm_quantize_x(benchmark::State& state, SimdTarget target) {
  const DotKernels k = dot_kernels(DType::Q4_K, target);
  const std::vector<float> f = random_floats(kCols, 5);
  std::vector<uint8_t> x(row_bytes(DType::Q8_K, kCols));
  for (auto _ : state) {
    k.quantize_x(f.data(), x.data(), kCols);
    benchmark::DoNotOptimize(x.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * kCols * 4);
}

const bool registered = [] {
  for (SimdTarget target : runnable_simd_targets()) {
    const std::string tn = simd_target_name(target);
    for (DType t : {DType::Q4_K, DType::Q6_K, DType::Q5_K, DType::Q3_K, DType::Q2_K}) {
      const std::string name(dtype_name(t));
      benchmark::RegisterBenchmark(("kq_dot/" + name + "/" + tn).c_str(), bm_dot, t, target, kDotRows)
          ->Unit(benchmark::kMicrosecond);
      benchmark::RegisterBenchmark(("kq_dot_l2/" + name + "/" + tn).c_str(), bm_dot, t, target, kDotRowsL2)
          ->Unit(benchmark::kMicrosecond);
      benchmark::RegisterBenchmark(("kq_tile/" + name + "/" + tn).c_str(), bm_tile, t, target)
          ->Unit(benchmark::kMillisecond);
    }
    benchmark::RegisterBenchmark(("kq_quantize_x/" + tn).c_str(), bm_quantize_x, target)->Unit(benchmark::kMicrosecond);
  }
  return true;
}();

}  // namespace
}  // namespace pagoda

// W8A8 kernels against Q8_0's on the same shapes, single thread:
//   w8a8_tile/<rows>x<cols>/<tokens>/<isa>   W8A8Kernels::tile, all tokens in one call (as
//                                            matmul() hands them); GFLOPS = 2 * rows * cols * tokens.
//   q8_0_tile/<rows>x<cols>/<tokens>/<target> DotKernels::tile of Q8_0, the same count.
//   w8a8_gemv/<isa>, q8_0_dot/<target>       decode over 4096 x 4096; bytes_per_second
//                                            counts weight bytes read.
// Activations are converted (and for W8A8 staged) beforehand in both: each format does that
// once per matmul, for all threads.
// Shapes: 2048 x 2048 (a 1B model's attention) and 5632 x 2048 (its FFN up/gate), 64 and 512
// tokens. Run e.g. bin/pagoda-microbench --benchmark_filter='(w8a8|q8_0)_tile'
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/matmul/dot_kernels.h"
#include "kernels/matmul/w8a8_kernels.h"
#include "quant/formats.h"
#include "quant/w8a8.h"

namespace pagoda {
namespace {

std::vector<float> normal(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& f : v) f = nd(rng);
  return v;
}

// rows x cols W8A8 weights: 8 distinct quantized rows copied round (speed does not depend
// on the values).
struct W8A8Matrix {
  std::vector<int8_t> q;
  std::vector<float> scale;
};

W8A8Matrix w8a8_weights(int64_t rows, int64_t cols) {
  W8A8Matrix m;
  m.q.resize(rows * cols);
  m.scale.resize(rows);
  for (int64_t r = 0; r < rows; ++r) {
    if (r < 8) m.scale[r] = quantize_row_w8a8(normal(cols, 1 + static_cast<uint32_t>(r)).data(), &m.q[r * cols], cols);
    else {
      std::memcpy(&m.q[r * cols], &m.q[(r % 8) * cols], cols);
      m.scale[r] = m.scale[r % 8];
    }
  }
  return m;
}

struct W8A8Activations {
  std::vector<int8_t> q;
  std::vector<float> scale;
  std::vector<int32_t> sum;
  std::vector<int32_t> staged;
  size_t stride;
  W8A8Acts view() const { return W8A8Acts{q.data(), stride, scale.data(), sum.data(), staged.data()}; }
};

W8A8Activations w8a8_acts(int64_t tokens, int64_t cols) {
  W8A8Activations a;
  a.stride = w8a8_act_stride(cols);
  a.q.resize(a.stride * tokens);
  a.scale.resize(tokens);
  a.sum.resize(tokens);
  for (int64_t t = 0; t < tokens; ++t)
    a.scale[t] = quantize_activation_w8a8(normal(cols, 100 + static_cast<uint32_t>(t)).data(), cols,
                                          a.q.data() + t * a.stride, &a.sum[t]);
  const int64_t block = w8a8_staged_dwords(cols) * kW8A8BlockTokens;
  const int64_t blocks = (tokens + kW8A8BlockTokens - 1) / kW8A8BlockTokens;
  a.staged.resize(block * blocks);
  for (int64_t b = 0; b < blocks; ++b)
    w8a8_stage_block(a.view(), b * kW8A8BlockTokens, std::min(kW8A8BlockTokens, tokens - b * kW8A8BlockTokens), cols,
                     a.staged.data() + b * block);
  return a;
}

std::vector<uint8_t> q8_0_weights(int64_t rows, int64_t cols) {
  const size_t rb = row_bytes(DType::Q8_0, cols);
  std::vector<uint8_t> w(rb * rows);
  for (int64_t r = 0; r < rows; ++r) {
    if (r < 8) quantize_row(DType::Q8_0, normal(cols, 1 + static_cast<uint32_t>(r)).data(), w.data() + r * rb, cols);
    else std::memcpy(w.data() + r * rb, w.data() + (r % 8) * rb, rb);
  }
  return w;
}

std::vector<uint8_t> q8_0_acts(int64_t tokens, int64_t cols) {
  const size_t xb = row_bytes(DType::Q8_0, cols);
  std::vector<uint8_t> x(xb * tokens);
  for (int64_t t = 0; t < tokens; ++t)
    quantize_activation_row(DType::Q8_0, normal(cols, 100 + static_cast<uint32_t>(t)).data(), x.data() + t * xb, cols);
  return x;
}

void set_gflops(benchmark::State& state, int64_t rows, int64_t cols, int64_t tokens) {
  state.counters["GFLOPS"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * 2.0 * rows * cols * tokens / 1e9, benchmark::Counter::kIsRate);
}

void bm_w8a8_tile(benchmark::State& state, SimdTarget isa, int64_t rows, int64_t cols, int64_t tokens) {
  const W8A8Kernels k = w8a8_kernels(isa);
  const W8A8Matrix w = w8a8_weights(rows, cols);
  const W8A8Activations x = w8a8_acts(tokens, cols);
  std::vector<float> y(rows * tokens);
  for (auto _ : state) {
    k.tile(cols, w.q.data(), cols, w.scale.data(), rows, x.view(), tokens, y.data(), rows);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  set_gflops(state, rows, cols, tokens);
}

void bm_q8_0_tile(benchmark::State& state, SimdTarget target, int64_t rows, int64_t cols, int64_t tokens) {
  const DotKernels k = dot_kernels(DType::Q8_0, target);
  const std::vector<uint8_t> w = q8_0_weights(rows, cols);
  const std::vector<uint8_t> x = q8_0_acts(tokens, cols);
  const size_t rb = row_bytes(DType::Q8_0, cols);
  std::vector<float> y(rows * tokens);
  for (auto _ : state) {
    k.tile(cols, w.data(), rb, rows, x.data(), rb, tokens, y.data(), rows);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  set_gflops(state, rows, cols, tokens);
}

void bm_w8a8_gemv(benchmark::State& state, SimdTarget isa) {
  const int64_t rows = 4096, cols = 4096;
  const W8A8Kernels k = w8a8_kernels(isa);
  const W8A8Matrix w = w8a8_weights(rows, cols);
  const W8A8Activations x = w8a8_acts(1, cols);
  std::vector<float> y(rows);
  for (auto _ : state) {
    k.gemv(cols, w.q.data(), cols, w.scale.data(), rows, x.view(), y.data());
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * rows * cols);
}

void bm_q8_0_dot(benchmark::State& state, SimdTarget target) {
  const int64_t rows = 4096, cols = 4096;
  const DotKernels k = dot_kernels(DType::Q8_0, target);
  const std::vector<uint8_t> w = q8_0_weights(rows, cols);
  const std::vector<uint8_t> x = q8_0_acts(1, cols);
  const size_t rb = row_bytes(DType::Q8_0, cols);
  std::vector<float> y(rows);
  for (auto _ : state) {
    for (int64_t r = 0; r < rows; ++r) y[r] = k.dot(cols, w.data() + r * rb, x.data());
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(rb * rows));
}

const bool registered = [] {
  struct Shape {
    int64_t rows, cols;
  };
  for (SimdTarget isa : runnable_simd_targets()) {
    if (isa == SimdTarget::kScalar) continue;
    const std::string in = simd_target_name(isa);
    for (Shape s : {Shape{2048, 2048}, Shape{5632, 2048}})
      for (int64_t tokens : {64, 512})
        benchmark::RegisterBenchmark(
            ("w8a8_tile/" + std::to_string(s.rows) + "x" + std::to_string(s.cols) + "/" + std::to_string(tokens) + "/" + in)
                .c_str(),
            bm_w8a8_tile, isa, s.rows, s.cols, tokens)
            ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("w8a8_gemv/" + in).c_str(), bm_w8a8_gemv, isa)->Unit(benchmark::kMicrosecond);
  }
  for (SimdTarget target : runnable_simd_targets()) {
    if (target == SimdTarget::kScalar) continue;
    const std::string tn = simd_target_name(target);
    for (Shape s : {Shape{2048, 2048}, Shape{5632, 2048}})
      for (int64_t tokens : {64, 512})
        benchmark::RegisterBenchmark(
            ("q8_0_tile/" + std::to_string(s.rows) + "x" + std::to_string(s.cols) + "/" + std::to_string(tokens) + "/" + tn)
                .c_str(),
            bm_q8_0_tile, target, s.rows, s.cols, tokens)
            ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("q8_0_dot/" + tn).c_str(), bm_q8_0_dot, target)->Unit(benchmark::kMicrosecond);
  }
  return true;
}();

}  // namespace
}  // namespace pagoda

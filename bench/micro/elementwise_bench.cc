// Elementwise kernels per SIMD target, single thread, on a 1B model's row sizes:
//   ew_<op>/<n>/<target>   items_per_second counts values.
// Run e.g. bin/pagoda-microbench --benchmark_filter=ew_
#include <benchmark/benchmark.h>

#include <random>
#include <string>
#include <vector>

#include "kernels/elementwise/elementwise.h"
#include "bench_data.h"

namespace pagoda {
namespace {

using bench::random_floats;

enum class Op { kRmsNorm, kSwiglu, kGeglu, kSoftmax, kAdd };

void bm_op(benchmark::State& state, Op op, SimdTarget target, int64_t n) {
  const ElementwiseKernels k = elementwise_kernels(target);
  const std::vector<float> x0 = random_floats(n, 1), w = random_floats(n, 2);
  std::vector<float> x = x0, out(n);
  for (auto _ : state) {
    switch (op) {
      case Op::kRmsNorm: k.rms_norm(x0.data(), w.data(), n, 1e-6f, out.data()); break;
      case Op::kSwiglu:
        x = x0;
        k.swiglu(x.data(), w.data(), n);
        break;
      case Op::kGeglu:
        x = x0;
        k.geglu(x.data(), w.data(), n);
        break;
      case Op::kSoftmax:
        x = x0;
        k.softmax(x.data(), n);
        break;
      case Op::kAdd: k.add(x.data(), w.data(), n); break;
    }
    benchmark::DoNotOptimize(x.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * n);
}

int register_all() {
  const std::pair<const char*, Op> ops[] = {{"rms_norm", Op::kRmsNorm}, {"swiglu", Op::kSwiglu}, {"geglu", Op::kGeglu},
                                            {"softmax", Op::kSoftmax},   {"add", Op::kAdd}};
  for (const auto& [name, op] : ops)
    for (SimdTarget s : runnable_simd_targets()) {
      const int64_t n = op == Op::kSwiglu || op == Op::kGeglu ? 5632 * 8 : 2048;
      const std::string full = std::string("ew_") + name + "/" + std::to_string(n) + "/" + simd_target_name(s);
      benchmark::RegisterBenchmark(full.c_str(), bm_op, op, s, n);
    }
  return 0;
}

const int kRegistered = register_all();

}  // namespace
}  // namespace pagoda

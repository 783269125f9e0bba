#include "kernels/matmul/sparse24_tile.h"

#include <vector>

#include "quant/sparse24.h"

namespace pagoda {
namespace {

thread_local std::vector<uint8_t> t_expanded;

template <DType T, SimdTarget S>
void expanded_tile(int64_t n, const uint8_t* w, size_t w_stride, int64_t rows, const uint8_t* x, size_t x_stride,
                   int64_t tokens, float* y, size_t y_stride) {
  static const DotKernels sparse = [] {
    DotKernels k;
    s24_set_expansion(T, k);
    return k;
  }();
  static const auto dense_tile = dot_kernels(sparse.expanded, S).tile;
  const size_t dense_row = row_bytes(sparse.expanded, n);
  t_expanded.resize(dense_row * static_cast<size_t>(rows));
  uint8_t* e = t_expanded.data();
  for (int64_t r = 0; r < rows; ++r) sparse.expand_row(w + r * w_stride, e + r * dense_row, n);
  dense_tile(n, e, dense_row, rows, x, x_stride, tokens, y, y_stride);
}

template <DType T>
decltype(DotKernels::tile) on_target(SimdTarget s) {
  switch (s) {
    case SimdTarget::kScalar: return expanded_tile<T, SimdTarget::kScalar>;
    case SimdTarget::kAvx2: return expanded_tile<T, SimdTarget::kAvx2>;
    case SimdTarget::kAvx512Bw: return expanded_tile<T, SimdTarget::kAvx512Bw>;
    case SimdTarget::kAvx512: return expanded_tile<T, SimdTarget::kAvx512>;
  }
  return nullptr;
}

}  // namespace

decltype(DotKernels::tile) s24_expanded_tile(DType t, SimdTarget s) {
  if (t == DType::Q8_0_S24) return on_target<DType::Q8_0_S24>(s);
  if (t == DType::Q4_0_S24) return on_target<DType::Q4_0_S24>(s);
  return nullptr;
}

void s24_set_expansion(DType t, DotKernels& k) {
  if (t == DType::Q8_0_S24) {
    k.expand_row = expand_row_q8_0_s24;
    k.expanded = DType::Q8_0;
  } else if (t == DType::Q4_0_S24) {
    k.expand_row = expand_row_q4_0_s24;
    k.expanded = DType::Q4_0;
  }
}

}  // namespace pagoda

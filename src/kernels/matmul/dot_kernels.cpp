#include "kernels/matmul/dot_kernels.h"

#include <array>
#include <iterator>
#include <mutex>

#include "kernels/matmul/simd_registry.h"
#include "kernels/matmul/sparse24_tile.h"
#include "quant/formats.h"

namespace pagoda {
namespace {

// Scalar tile: the reference dot per output; weight rows outer so each row is read once
// per tile while it is still in cache.
template <DType T>
void scalar_tile(int64_t n, const uint8_t* w, size_t w_stride, int64_t rows, const uint8_t* x, size_t x_stride,
                 int64_t tokens, float* y, size_t y_stride) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t t = 0; t < tokens; ++t) y[t * y_stride + r] = vec_dot(T, n, w + r * w_stride, x + t * x_stride);
}

using TileFn = decltype(DotKernels::tile);

TileFn scalar_tile_for(DType t) {
  switch (t) {
#define PAGODA_FORMAT(NAME, ...) \
  case DType::NAME: return scalar_tile<DType::NAME>;
#include "tensor/formats.inc"
    default: return nullptr;
  }
}

// One scalar dot per format through the type-erased reference.
template <DType T>
float scalar_dot(int64_t n, const void* w, const void* x) {
  return vec_dot(T, n, w, x);
}

template <DType T>
void scalar_quantize_x(const float* src, void* dst, int64_t n) {
  quantize_activation_row(vec_dot_type(T), src, dst, n);
}

DotKernels scalar_kernels(DType t) {
  DotKernels k;
  switch (t) {
#define PAGODA_FORMAT(NAME, ...)                   \
  case DType::NAME:                                \
    k.dot = scalar_dot<DType::NAME>;               \
    k.quantize_x = scalar_quantize_x<DType::NAME>; \
    break;
#include "tensor/formats.inc"
    default: break;
  }
  k.tile = scalar_tile_for(t);
  s24_set_expansion(t, k);
  return k;
}

using DotRowsFn = decltype(DotKernels::dot_rows);

// dot_rows for kernels whose dot came without one: a loop over the dot of format T on
// target S (a plain function pointer cannot carry the dot, so it is looked up once here).
template <DType T, SimdTarget S>
void loop_dot_rows(int64_t n, const uint8_t* w, size_t w_stride, int64_t rows, const void* x, float* y) {
  static const auto dot = dot_kernels(T, S).dot;
  for (int64_t r = 0; r < rows; ++r) y[r] = dot(n, w + r * w_stride, x);
}

template <DType T>
DotRowsFn loop_dot_rows_on(SimdTarget s) {
  switch (s) {
    case SimdTarget::kScalar: return loop_dot_rows<T, SimdTarget::kScalar>;
    case SimdTarget::kAvx2:
    case SimdTarget::kAvx512Bw: return loop_dot_rows<T, SimdTarget::kAvx2>;
    case SimdTarget::kAvx512: return loop_dot_rows<T, SimdTarget::kAvx512>;
  }
  return nullptr;
}

DotRowsFn loop_dot_rows_for(DType t, SimdTarget s) {
  switch (t) {
#define PAGODA_FORMAT(NAME, ...) \
  case DType::NAME: return loop_dot_rows_on<DType::NAME>(s);
#include "tensor/formats.inc"
    default: return nullptr;
  }
}

}  // namespace

DotKernels dot_kernels(DType t, SimdTarget target) {
  DotKernels k = scalar_kernels(t);
  // A target that replaces dot but not dot_rows leaves a dot_rows that no longer matches.
  auto stage = [&](void (*reg)(DType, DotKernels&)) {
    const auto dot = k.dot;
    const auto rows = k.dot_rows;
    reg(t, k);
    if (k.dot != dot && k.dot_rows == rows) {
      k.dot_rows = nullptr;
      k.gemv_by_rows = false;
    }
  };
  if (target >= SimdTarget::kAvx2) stage(simd::register_avx2);
  if (target >= SimdTarget::kAvx512) stage(simd::register_avx512);
  if (k.dot != nullptr && k.dot_rows == nullptr) k.dot_rows = loop_dot_rows_for(t, target);
  return k;
}

const DotKernels& dot_kernels(DType t) {
  // Indexed by the type's row in formats.inc (ids are sparse: Pagoda's own start at 1024).
  static constexpr DType kAll[] = {
#define PAGODA_FORMAT(NAME, ...) DType::NAME,
#include "tensor/formats.inc"
  };
  static std::array<DotKernels, std::size(kAll)> table;
  static std::once_flag once;
  std::call_once(once, [] {
    for (size_t i = 0; i < table.size(); ++i) table[i] = dot_kernels(kAll[i], best_simd_target());
  });
  for (size_t i = 0; i < table.size(); ++i)
    if (kAll[i] == t) return table[i];
  static const DotKernels kNone;
  return kNone;
}

}  // namespace pagoda

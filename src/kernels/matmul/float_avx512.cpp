// avx512 bodies of the float format kernels: float_body.h over vec_avx512.h, plus
// BF16 by vdpbf16ps (see dot_kernels.h, simd_registry.h). Compiled for avx512 (F, BW,
// VL, DQ, VNNI, BF16) only and called only when the CPU has it; the avx512bf16 bodies
// are registered only when cpu_features() reports it.
//
// With avx512bf16, vdpbf16ps multiplies BF16 pairs exactly and treats BF16 subnormals
// (below 1.2e-38) as zero, which moves no sum by more than that.
//
// tile: register blocks of 4 rows x 6 tokens (24 accumulators of 32). dot prefetches 8 KB
// ahead (single core, 65536 x 2048 from DRAM: F16 31 -> 37 GB/s, F32 25 -> 32 with 8 KB;
// 16 KB was no better for F16).
#include "kernels/simd/simd_intrinsics.h"

#include "base/cpu_features.h"
#include "kernels/simd/vec_avx512.h"
#include "kernels/matmul/float_body.h"
#include "kernels/matmul/simd_registry.h"

namespace pagoda::simd {
namespace {

using Body = FloatBody<V512, 4, 6, 8192>;

inline __mmask32 tail_mask32(int64_t r) { return static_cast<__mmask32>((1ull << r) - 1ull); }

// The same with BF16 pairs multiplied and summed by vdpbf16ps (32 values a step).
template <int RM, int RN>
void block_dpbf16(int64_t n, const uint16_t* w, size_t ws, const uint16_t* x, size_t xs, float* y, size_t ys) {
  __m512 acc[RM][RN];
  for (int r = 0; r < RM; ++r)
    for (int t = 0; t < RN; ++t) acc[r][t] = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m512bh wv[RM];
    for (int r = 0; r < RM; ++r) wv[r] = (__m512bh)_mm512_loadu_si512(w + r * ws + i);
    for (int t = 0; t < RN; ++t) {
      const __m512bh xv = (__m512bh)_mm512_loadu_si512(x + t * xs + i);
      for (int r = 0; r < RM; ++r) acc[r][t] = _mm512_dpbf16_ps(acc[r][t], wv[r], xv);
    }
  }
  if (i < n) {
    const __mmask32 m = tail_mask32(n - i);
    __m512bh wv[RM];
    for (int r = 0; r < RM; ++r) wv[r] = (__m512bh)_mm512_maskz_loadu_epi16(m, w + r * ws + i);
    for (int t = 0; t < RN; ++t) {
      const __m512bh xv = (__m512bh)_mm512_maskz_loadu_epi16(m, x + t * xs + i);
      for (int r = 0; r < RM; ++r) acc[r][t] = _mm512_dpbf16_ps(acc[r][t], wv[r], xv);
    }
  }
  Body::store_sums<RM, RN>(acc, y, ys);
}

float dot_dpbf16(int64_t n, const void* wv, const void* xv) {
  const auto* w = static_cast<const uint16_t*>(wv);
  const auto* x = static_cast<const uint16_t*>(xv);
  __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps(), a2 = _mm512_setzero_ps(), a3 = _mm512_setzero_ps();
  auto ld = [](const uint16_t* p) { return (__m512bh)_mm512_loadu_si512(p); };
  int64_t i = 0;
  for (; i + 128 <= n; i += 128) {
    a0 = _mm512_dpbf16_ps(a0, ld(w + i), ld(x + i));
    a1 = _mm512_dpbf16_ps(a1, ld(w + i + 32), ld(x + i + 32));
    a2 = _mm512_dpbf16_ps(a2, ld(w + i + 64), ld(x + i + 64));
    a3 = _mm512_dpbf16_ps(a3, ld(w + i + 96), ld(x + i + 96));
  }
  for (; i + 32 <= n; i += 32) a0 = _mm512_dpbf16_ps(a0, ld(w + i), ld(x + i));
  if (i < n) {
    const __mmask32 m = tail_mask32(n - i);
    a1 = _mm512_dpbf16_ps(a1, (__m512bh)_mm512_maskz_loadu_epi16(m, w + i), (__m512bh)_mm512_maskz_loadu_epi16(m, x + i));
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}

template <int RM, int RN>
struct Dpbf16K {
  static void run(int64_t n, const uint16_t* w, size_t ws, const uint16_t* x, size_t xs, float* y, size_t ys) {
    block_dpbf16<RM, RN>(n, w, ws, x, xs, y, ys);
  }
};

void tile_dpbf16(int64_t n, const uint8_t* w, size_t w_stride, int64_t rows, const uint8_t* x, size_t x_stride,
                 int64_t tokens, float* y, size_t y_stride) {
  Body::tile_with<uint16_t, Dpbf16K>(n, w, w_stride, rows, x, x_stride, tokens, y, y_stride);
}

}  // namespace

void register_float_avx512(DType t, DotKernels& k) {
  Body::fill(t, k);
  if (t == DType::BF16 && cpu_features().avx512bf16) {
    k.dot = dot_dpbf16;
    k.tile = tile_dpbf16;
  }
}

}  // namespace pagoda::simd

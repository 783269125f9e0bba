// avx512 bodies of the float format kernels (see dot_kernels.h, simd_registry.h). This
// file is compiled for avx512 (F, BW, VL, DQ, VNNI, BF16) only and called only when the
// CPU has it; the avx512bf16 bodies are registered only when cpu_features() reports it.
//
// Everything here has internal linkage and calls no inline function of a shared header,
// so no AVX-512 copy of one can be picked by the linker for code that runs elsewhere.
//
// Numerics: products of F16 or BF16 values are exact in float; the sums run in float
// lanes (FMA) and are added across lanes at the end, so they differ from the scalar
// references (double sums) by float rounding of the sum only, as ggml's SIMD path does.
// Activation conversion (quantize_x) is bit-exact with the scalar one, NaN included.
// With avx512bf16, vdpbf16ps multiplies BF16 pairs exactly and treats BF16 subnormals
// (below 1.2e-38) as zero, which moves no sum by more than that.
//
// dot (decode, a GEMV bound by memory bandwidth): the weight row streams once, 2 bytes a
// value for F16/BF16, into four independent accumulators.
//
// tile (prefill, compute bound): register blocks of kRm rows x kRn tokens, each weight
// and activation vector loaded (and converted) once per block and step and used kRn or
// kRm times. The rows of a block stay in L1 while the block walks over the tokens.
#include "kernels/simd_intrinsics.h"

#include "base/cpu_features.h"
#include "kernels/simd_registry.h"
#include "quant/formats.h"

namespace pagoda::simd {
namespace {

constexpr int kRm = 4;  // weight rows per register block
constexpr int kRn = 6;  // tokens per register block (kRm * kRn accumulators of 32)

inline __mmask16 tail_mask16(int64_t r) { return static_cast<__mmask16>((1u << r) - 1u); }
inline __mmask32 tail_mask32(int64_t r) { return static_cast<__mmask32>((1ull << r) - 1ull); }

// Element formats as 16 float lanes.
struct F32 {
  using T = float;
  static __m512 load(const T* p) { return _mm512_loadu_ps(p); }
  static __m512 load(const T* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
};
struct F16 {
  using T = uint16_t;
  static __m512 load(const T* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static __m512 load(const T* p, __mmask16 m) { return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p)); }
};
struct BF16 {
  using T = uint16_t;
  static __m512 widen(__m256i h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); }
  static __m512 load(const T* p) { return widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static __m512 load(const T* p, __mmask16 m) { return widen(_mm256_maskz_loadu_epi16(m, p)); }
};

// How far ahead dot prefetches the weights (single core, 65536 x 2048 from DRAM: F16
// 31 -> 37 GB/s, F32 25 -> 32 with 8 KB; 16 KB was no better for F16).
constexpr int64_t kPrefetchBytes = 8192;

template <class E>
float dot(int64_t n, const void* wv, const void* xv) {
  const auto* w = static_cast<const typename E::T*>(wv);
  const auto* x = static_cast<const typename E::T*>(xv);
  __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps(), a2 = _mm512_setzero_ps(), a3 = _mm512_setzero_ps();
  int64_t i = 0;
  constexpr int64_t kStepBytes = 64 * sizeof(typename E::T);
  for (; i + 64 <= n; i += 64) {
    // Every line of the weights kPrefetchBytes on (into the next rows once past this
    // one's end): decode reads matrices far larger than the caches row after row.
    // (Integer arithmetic: the address may lie past the matrix, where a prefetch is
    // harmless but a pointer would not be.)
    const auto* ahead = reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(w + i) + kPrefetchBytes);
#pragma GCC unroll 4
    for (int64_t o = 0; o < kStepBytes; o += 64) _mm_prefetch(ahead + o, _MM_HINT_T0);
    a0 = _mm512_fmadd_ps(E::load(w + i), E::load(x + i), a0);
    a1 = _mm512_fmadd_ps(E::load(w + i + 16), E::load(x + i + 16), a1);
    a2 = _mm512_fmadd_ps(E::load(w + i + 32), E::load(x + i + 32), a2);
    a3 = _mm512_fmadd_ps(E::load(w + i + 48), E::load(x + i + 48), a3);
  }
  for (; i + 16 <= n; i += 16) a0 = _mm512_fmadd_ps(E::load(w + i), E::load(x + i), a0);
  if (i < n) {
    const __mmask16 m = tail_mask16(n - i);
    a1 = _mm512_fmadd_ps(E::load(w + i, m), E::load(x + i, m), a1);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}

// Transposing sums of 16 (or 8) vectors: lane i of the result = the sum of a[i]'s lanes.
// Pairs are interleaved and added within 128-bit lanes, then 128-bit lanes are added
// across vectors; about 3 instructions per sum instead of ~8 for a reduce of its own.
__attribute__((always_inline)) inline __m512 reduce16(const __m512 (&a)[16]) {
  __m512 c[8], d[4];
  for (int p = 0; p < 8; ++p)
    c[p] = _mm512_add_ps(_mm512_unpacklo_ps(a[2 * p], a[2 * p + 1]), _mm512_unpackhi_ps(a[2 * p], a[2 * p + 1]));
  for (int q = 0; q < 4; ++q) {
    const __m512d x = _mm512_castps_pd(c[2 * q]), y = _mm512_castps_pd(c[2 * q + 1]);
    d[q] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(x, y)), _mm512_castpd_ps(_mm512_unpackhi_pd(x, y)));
  }
  const __m512 u0 = _mm512_add_ps(_mm512_shuffle_f32x4(d[0], d[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                  _mm512_shuffle_f32x4(d[0], d[1], _MM_SHUFFLE(3, 1, 3, 1)));
  const __m512 u1 = _mm512_add_ps(_mm512_shuffle_f32x4(d[2], d[3], _MM_SHUFFLE(2, 0, 2, 0)),
                                  _mm512_shuffle_f32x4(d[2], d[3], _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm512_add_ps(_mm512_shuffle_f32x4(u0, u1, _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_f32x4(u0, u1, _MM_SHUFFLE(3, 1, 3, 1)));
}
__attribute__((always_inline)) inline __m256 reduce8(const __m512 (&a)[8]) {
  __m512 c[4], d[2];
  for (int p = 0; p < 4; ++p)
    c[p] = _mm512_add_ps(_mm512_unpacklo_ps(a[2 * p], a[2 * p + 1]), _mm512_unpackhi_ps(a[2 * p], a[2 * p + 1]));
  for (int q = 0; q < 2; ++q) {
    const __m512d x = _mm512_castps_pd(c[2 * q]), y = _mm512_castps_pd(c[2 * q + 1]);
    d[q] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(x, y)), _mm512_castpd_ps(_mm512_unpackhi_pd(x, y)));
  }
  const __m512 u = _mm512_add_ps(_mm512_shuffle_f32x4(d[0], d[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                 _mm512_shuffle_f32x4(d[0], d[1], _MM_SHUFFLE(3, 1, 3, 1)));
  const __m512 r = _mm512_add_ps(_mm512_shuffle_f32x4(u, u, _MM_SHUFFLE(0, 0, 2, 0)),
                                 _mm512_shuffle_f32x4(u, u, _MM_SHUFFLE(0, 0, 3, 1)));
  return _mm512_castps512_ps256(r);
}

// Stores the sums of acc[r][t] to y[t * ys + r]. With 4 rows, the accumulators of four
// tokens (or two) go through one transposing sum, and lanes 4t..4t+3 are token t's rows.
template <int RM, int RN>
__attribute__((always_inline)) inline void store_sums(__m512 (&acc)[RM][RN], float* y, size_t ys) {
  int t = 0;
  if constexpr (RM == 4) {
    for (; t + 4 <= RN; t += 4) {
      __m512 a[16];
      for (int k = 0; k < 4; ++k)
        for (int r = 0; r < 4; ++r) a[4 * k + r] = acc[r][t + k];
      const __m512 s = reduce16(a);
      _mm_storeu_ps(y + (t + 0) * ys, _mm512_extractf32x4_ps(s, 0));
      _mm_storeu_ps(y + (t + 1) * ys, _mm512_extractf32x4_ps(s, 1));
      _mm_storeu_ps(y + (t + 2) * ys, _mm512_extractf32x4_ps(s, 2));
      _mm_storeu_ps(y + (t + 3) * ys, _mm512_extractf32x4_ps(s, 3));
    }
    for (; t + 2 <= RN; t += 2) {
      __m512 a[8];
      for (int k = 0; k < 2; ++k)
        for (int r = 0; r < 4; ++r) a[4 * k + r] = acc[r][t + k];
      const __m256 s = reduce8(a);
      _mm_storeu_ps(y + (t + 0) * ys, _mm256_castps256_ps128(s));
      _mm_storeu_ps(y + (t + 1) * ys, _mm256_extractf128_ps(s, 1));
    }
  }
  for (; t < RN; ++t)
    for (int r = 0; r < RM; ++r) y[t * ys + r] = _mm512_reduce_add_ps(acc[r][t]);
}

// One register block: y[t * ys + r] = dot(w + r * ws, x + t * xs) for r < RM, t < RN.
template <class E, int RM, int RN>
void block(int64_t n, const typename E::T* w, size_t ws, const typename E::T* x, size_t xs, float* y, size_t ys) {
  __m512 acc[RM][RN];
  for (int r = 0; r < RM; ++r)
    for (int t = 0; t < RN; ++t) acc[r][t] = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512 wv[RM];
    for (int r = 0; r < RM; ++r) wv[r] = E::load(w + r * ws + i);
    for (int t = 0; t < RN; ++t) {
      const __m512 xv = E::load(x + t * xs + i);
      for (int r = 0; r < RM; ++r) acc[r][t] = _mm512_fmadd_ps(wv[r], xv, acc[r][t]);
    }
  }
  if (i < n) {
    const __mmask16 m = tail_mask16(n - i);
    __m512 wv[RM];
    for (int r = 0; r < RM; ++r) wv[r] = E::load(w + r * ws + i, m);
    for (int t = 0; t < RN; ++t) {
      const __m512 xv = E::load(x + t * xs + i, m);
      for (int r = 0; r < RM; ++r) acc[r][t] = _mm512_fmadd_ps(wv[r], xv, acc[r][t]);
    }
  }
  store_sums<RM, RN>(acc, y, ys);
}

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
  store_sums<RM, RN>(acc, y, ys);
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

// Block kernels for every RM <= kRm, RN <= kRn, so edges use the same code at a smaller size.
template <class T>
using BlockFn = void (*)(int64_t, const T*, size_t, const T*, size_t, float*, size_t);

template <class T, template <int, int> class K>
struct BlockTable {
  BlockFn<T> fn[kRm][kRn];
  constexpr BlockTable() : fn{} { fill<1>(); }
  template <int RM>
  constexpr void fill() {
    fill_row<RM, 1>();
    if constexpr (RM < kRm) fill<RM + 1>();
  }
  template <int RM, int RN>
  constexpr void fill_row() {
    fn[RM - 1][RN - 1] = &K<RM, RN>::run;
    if constexpr (RN < kRn) fill_row<RM, RN + 1>();
  }
};

template <class E>
struct Plain {
  template <int RM, int RN>
  struct K {
    static void run(int64_t n, const typename E::T* w, size_t ws, const typename E::T* x, size_t xs, float* y,
                    size_t ys) {
      block<E, RM, RN>(n, w, ws, x, xs, y, ys);
    }
  };
};
template <int RM, int RN>
struct Dpbf16K {
  static void run(int64_t n, const uint16_t* w, size_t ws, const uint16_t* x, size_t xs, float* y, size_t ys) {
    block_dpbf16<RM, RN>(n, w, ws, x, xs, y, ys);
  }
};

template <class T, template <int, int> class K>
void tile_with(int64_t n, const uint8_t* w, size_t w_stride, int64_t rows, const uint8_t* x, size_t x_stride,
               int64_t tokens, float* y, size_t y_stride) {
  static constexpr BlockTable<T, K> kTable;
  const size_t ws = w_stride / sizeof(T), xs = x_stride / sizeof(T);
  const auto* wt = reinterpret_cast<const T*>(w);
  const auto* xt = reinterpret_cast<const T*>(x);
  for (int64_t r = 0; r < rows; r += kRm) {
    const int64_t rm = rows - r < kRm ? rows - r : kRm;
    for (int64_t t = 0; t < tokens; t += kRn) {
      const int64_t rn = tokens - t < kRn ? tokens - t : kRn;
      kTable.fn[rm - 1][rn - 1](n, wt + r * ws, ws, xt + t * xs, xs, y + t * y_stride + r, y_stride);
    }
  }
}

template <class E>
void tile(int64_t n, const uint8_t* w, size_t w_stride, int64_t rows, const uint8_t* x, size_t x_stride,
          int64_t tokens, float* y, size_t y_stride) {
  tile_with<typename E::T, Plain<E>::template K>(n, w, w_stride, rows, x, x_stride, tokens, y, y_stride);
}

void tile_dpbf16(int64_t n, const uint8_t* w, size_t w_stride, int64_t rows, const uint8_t* x, size_t x_stride,
                 int64_t tokens, float* y, size_t y_stride) {
  tile_with<uint16_t, Dpbf16K>(n, w, w_stride, rows, x, x_stride, tokens, y, y_stride);
}

// ---------------------------------------------------------------- activations

void quantize_x_f32(const float* src, void* dst, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

// vcvtps2ph rounds to nearest even like fp32_to_fp16 but quiets a signalling NaN, where
// the scalar conversion keeps numpy's payload bits: a chunk holding a NaN goes scalar.
void quantize_x_f16(const float* src, void* dst, int64_t n) {
  auto* out = static_cast<uint16_t*>(dst);
  auto convert = [&](int64_t i, __m512 v, __mmask16 m, int64_t count) {
    if (_mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q) != 0) quantize_activation_row(DType::F16, src + i, out + i, count);
    else _mm256_mask_storeu_epi16(out + i, m, _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  };
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) convert(i, _mm512_loadu_ps(src + i), static_cast<__mmask16>(0xffff), 16);
  if (i < n) convert(i, _mm512_maskz_loadu_ps(tail_mask16(n - i), src + i), tail_mask16(n - i), n - i);
}

// fp32_to_bf16 in integers: round to nearest even, NaN -> (bits >> 16) | 64. (vcvtneps2bf16
// would flush subnormals, so it is not used.)
void quantize_x_bf16(const float* src, void* dst, int64_t n) {
  auto* out = static_cast<uint16_t*>(dst);
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff);
  const __m512i inf = _mm512_set1_epi32(0x7f800000);
  const __m512i round = _mm512_set1_epi32(0x7fff);
  const __m512i one = _mm512_set1_epi32(1);
  const __m512i quiet = _mm512_set1_epi32(64);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? static_cast<__mmask16>(0xffff) : tail_mask16(n - i);
    const __m512i u = _mm512_maskz_loadu_epi32(m, src + i);
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, abs_mask), inf);
    const __m512i hi = _mm512_srli_epi32(u, 16);
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(round, _mm512_and_si512(hi, one))), 16);
    r = _mm512_mask_or_epi32(r, nan, hi, quiet);
    _mm256_mask_storeu_epi16(out + i, m, _mm512_cvtepi32_epi16(r));
  }
}

}  // namespace

void register_float_avx512(DType t, DotKernels& k) {
  switch (t) {
    case DType::F32:
      k.dot = dot<F32>;
      k.tile = tile<F32>;
      k.quantize_x = quantize_x_f32;
      break;
    case DType::F16:
      k.dot = dot<F16>;
      k.tile = tile<F16>;
      k.quantize_x = quantize_x_f16;
      break;
    case DType::BF16:
      if (cpu_features().avx512bf16) {
        k.dot = dot_dpbf16;
        k.tile = tile_dpbf16;
      } else {
        k.dot = dot<BF16>;
        k.tile = tile<BF16>;
      }
      k.quantize_x = quantize_x_bf16;
      break;
    default: break;
  }
}

}  // namespace pagoda::simd

// avx2 bodies of the float format kernels (see dot_kernels.h, simd_registry.h). This
// file is compiled for avx2 (+FMA, F16C) only and called only when the CPU has it.
//
// Everything here has internal linkage and calls no inline function of a shared header,
// so no AVX2 copy of one can be picked by the linker for code that runs elsewhere.
//
// Numerics as in float_avx512.cpp: exact F16/BF16 products summed in float lanes; the
// activation conversions are bit-exact with the scalar ones. The last n % 8 values of a
// row go through the same float lanes via a zero-padded copy.
//
// tile: register blocks of 3 rows x 4 tokens (12 accumulators, 3 weight vectors and one
// activation vector fill the 16 ymm registers).
#include "kernels/simd_intrinsics.h"

#include "kernels/simd_registry.h"
#include "quant/formats.h"

namespace pagoda::simd {
namespace {

constexpr int kRm = 3;
constexpr int kRn = 4;

struct F32 {
  using T = float;
  static __m256 load(const T* p) { return _mm256_loadu_ps(p); }
};
struct F16 {
  using T = uint16_t;
  static __m256 load(const T* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
};
struct BF16 {
  using T = uint16_t;
  static __m256 load(const T* p) {
    const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
  }
};

// The last r < 8 values of a row as one vector (zeros after them).
template <class E>
__m256 load_tail(const typename E::T* p, int64_t r) {
  alignas(32) typename E::T buf[8] = {};
  std::memcpy(buf, p, static_cast<size_t>(r) * sizeof(typename E::T));
  return E::load(buf);
}

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

template <class E>
float dot(int64_t n, const void* wv, const void* xv) {
  const auto* w = static_cast<const typename E::T*>(wv);
  const auto* x = static_cast<const typename E::T*>(xv);
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    a0 = _mm256_fmadd_ps(E::load(w + i), E::load(x + i), a0);
    a1 = _mm256_fmadd_ps(E::load(w + i + 8), E::load(x + i + 8), a1);
    a2 = _mm256_fmadd_ps(E::load(w + i + 16), E::load(x + i + 16), a2);
    a3 = _mm256_fmadd_ps(E::load(w + i + 24), E::load(x + i + 24), a3);
  }
  for (; i + 8 <= n; i += 8) a0 = _mm256_fmadd_ps(E::load(w + i), E::load(x + i), a0);
  if (i < n) a1 = _mm256_fmadd_ps(load_tail<E>(w + i, n - i), load_tail<E>(x + i, n - i), a1);
  return hsum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
}

template <class E, int RM, int RN>
void block(int64_t n, const typename E::T* w, size_t ws, const typename E::T* x, size_t xs, float* y, size_t ys) {
  __m256 acc[RM][RN];
  for (int r = 0; r < RM; ++r)
    for (int t = 0; t < RN; ++t) acc[r][t] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 wv[RM];
    for (int r = 0; r < RM; ++r) wv[r] = E::load(w + r * ws + i);
    for (int t = 0; t < RN; ++t) {
      const __m256 xv = E::load(x + t * xs + i);
      for (int r = 0; r < RM; ++r) acc[r][t] = _mm256_fmadd_ps(wv[r], xv, acc[r][t]);
    }
  }
  if (i < n) {
    __m256 wv[RM];
    for (int r = 0; r < RM; ++r) wv[r] = load_tail<E>(w + r * ws + i, n - i);
    for (int t = 0; t < RN; ++t) {
      const __m256 xv = load_tail<E>(x + t * xs + i, n - i);
      for (int r = 0; r < RM; ++r) acc[r][t] = _mm256_fmadd_ps(wv[r], xv, acc[r][t]);
    }
  }
  for (int r = 0; r < RM; ++r)
    for (int t = 0; t < RN; ++t) y[t * ys + r] = hsum(acc[r][t]);
}

template <class E>
using BlockFn = void (*)(int64_t, const typename E::T*, size_t, const typename E::T*, size_t, float*, size_t);

template <class E>
struct BlockTable {
  BlockFn<E> fn[kRm][kRn];
  constexpr BlockTable() : fn{} { fill<1>(); }
  template <int RM>
  constexpr void fill() {
    fill_row<RM, 1>();
    if constexpr (RM < kRm) fill<RM + 1>();
  }
  template <int RM, int RN>
  constexpr void fill_row() {
    fn[RM - 1][RN - 1] = &block<E, RM, RN>;
    if constexpr (RN < kRn) fill_row<RM, RN + 1>();
  }
};

template <class E>
void tile(int64_t n, const uint8_t* w, size_t w_stride, int64_t rows, const uint8_t* x, size_t x_stride,
          int64_t tokens, float* y, size_t y_stride) {
  using T = typename E::T;
  static constexpr BlockTable<E> kTable;
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

// ---------------------------------------------------------------- activations

void quantize_x_f32(const float* src, void* dst, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

// vcvtps2ph rounds to nearest even like fp32_to_fp16 but quiets a signalling NaN, where
// the scalar conversion keeps numpy's payload bits: a chunk holding a NaN (and the tail)
// goes scalar.
void quantize_x_f16(const float* src, void* dst, int64_t n) {
  auto* out = static_cast<uint16_t*>(dst);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(src + i);
    if (_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)) != 0) {
      quantize_activation_row(DType::F16, src + i, out + i, 8);
      continue;
    }
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                     _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  if (i < n) quantize_activation_row(DType::F16, src + i, out + i, n - i);
}

// fp32_to_bf16 in integers: round to nearest even, NaN -> (bits >> 16) | 64.
inline __m256i bf16_of(__m256i u) {
  const __m256i abs = _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff));
  const __m256i nan = _mm256_cmpgt_epi32(abs, _mm256_set1_epi32(0x7f800000));  // abs is non-negative
  const __m256i hi = _mm256_srli_epi32(u, 16);
  const __m256i bias = _mm256_add_epi32(_mm256_set1_epi32(0x7fff), _mm256_and_si256(hi, _mm256_set1_epi32(1)));
  const __m256i r = _mm256_srli_epi32(_mm256_add_epi32(u, bias), 16);
  return _mm256_blendv_epi8(r, _mm256_or_si256(hi, _mm256_set1_epi32(64)), nan);
}

void quantize_x_bf16(const float* src, void* dst, int64_t n) {
  auto* out = static_cast<uint16_t*>(dst);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i a = bf16_of(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i)));
    const __m256i b = bf16_of(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i + 8)));
    // packus interleaves 128-bit lanes (a0 b0 a1 b1); the permute restores a, b order.
    const __m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi32(a, b), 0xd8);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), p);
  }
  if (i < n) quantize_activation_row(DType::BF16, src + i, out + i, n - i);
}

}  // namespace

void register_float_avx2(DType t, DotKernels& k) {
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
      k.dot = dot<BF16>;
      k.tile = tile<BF16>;
      k.quantize_x = quantize_x_bf16;
      break;
    default: break;
  }
}

}  // namespace pagoda::simd

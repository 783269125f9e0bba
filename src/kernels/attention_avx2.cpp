// avx2 body of attention_causal (attention_body.h over 8-float vectors). Compiled for
// avx2 (+FMA, F16C) only and called only when the CPU has it.
#include "kernels/simd_intrinsics.h"

#include "kernels/attention_body.h"

namespace pagoda::attn {
namespace {

struct V256 {
  using F = __m256;
  static constexpr int kLanes = 8;
  static F zero() { return _mm256_setzero_ps(); }
  static F load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, F v) { _mm256_storeu_ps(p, v); }
  static F load_h(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static F fma(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F add(F a, F b) { return _mm256_add_ps(a, b); }
  static F load_i8(const int8_t* p) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
  }
  static F set1(float x) { return _mm256_set1_ps(x); }
  static F max(F a, F b) { return _mm256_max_ps(a, b); }
  static float hmax(F a) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
  }
  static F round_h(F a) { return _mm256_cvtph_ps(_mm256_cvtps_ph(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)); }
  // Transposing sum: lane i of the result = sum of a[i]'s lanes (see attention_avx512.cpp).
  __attribute__((always_inline)) static F reduce(const F (&a)[kLanes]) {
    F c[4];
    for (int p = 0; p < 4; ++p)
      c[p] = _mm256_add_ps(_mm256_unpacklo_ps(a[2 * p], a[2 * p + 1]), _mm256_unpackhi_ps(a[2 * p], a[2 * p + 1]));
    F d[2];
    for (int q = 0; q < 2; ++q) {
      const __m256d x = _mm256_castps_pd(c[2 * q]), y = _mm256_castps_pd(c[2 * q + 1]);
      d[q] = _mm256_add_ps(_mm256_castpd_ps(_mm256_unpacklo_pd(x, y)), _mm256_castpd_ps(_mm256_unpackhi_pd(x, y)));
    }
    return _mm256_add_ps(_mm256_permute2f128_ps(d[0], d[1], 0x20), _mm256_permute2f128_ps(d[0], d[1], 0x31));
  }
  // 8 x 8 transpose in registers.
  __attribute__((always_inline)) static void transpose(F (&r)[kLanes]) {
    F t[8], u[8];
    for (int p = 0; p < 4; ++p) {
      t[2 * p] = _mm256_unpacklo_ps(r[2 * p], r[2 * p + 1]);
      t[2 * p + 1] = _mm256_unpackhi_ps(r[2 * p], r[2 * p + 1]);
    }
    for (int h = 0; h < 2; ++h) {
      u[4 * h + 0] = _mm256_shuffle_ps(t[4 * h], t[4 * h + 2], 0x44);
      u[4 * h + 1] = _mm256_shuffle_ps(t[4 * h], t[4 * h + 2], 0xEE);
      u[4 * h + 2] = _mm256_shuffle_ps(t[4 * h + 1], t[4 * h + 3], 0x44);
      u[4 * h + 3] = _mm256_shuffle_ps(t[4 * h + 1], t[4 * h + 3], 0xEE);
    }
    for (int k = 0; k < 4; ++k) {
      r[k] = _mm256_permute2f128_ps(u[k], u[k + 4], 0x20);
      r[k + 4] = _mm256_permute2f128_ps(u[k], u[k + 4], 0x31);
    }
  }
};

}  // namespace

void attend_avx2(const Unit& u) {
  if (u.i8) Attend<V256, true>::run(u);
  else Attend<V256, false>::run(u);
}

}  // namespace pagoda::attn

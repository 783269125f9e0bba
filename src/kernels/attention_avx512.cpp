// avx512 body of attention_causal (attention_body.h over 16-float vectors). Compiled for
// avx512 only and called only when the CPU has it.
#include "kernels/simd_intrinsics.h"

#include "kernels/attention_body.h"

namespace pagoda::attn {
namespace {

struct V512 {
  using F = __m512;
  static constexpr int kLanes = 16;
  static F zero() { return _mm512_setzero_ps(); }
  static F load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, F v) { _mm512_storeu_ps(p, v); }
  static F load_h(const uint16_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static F fma(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F add(F a, F b) { return _mm512_add_ps(a, b); }
  static F load_i8(const int8_t* p) {
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  }
  static F set1(float x) { return _mm512_set1_ps(x); }
  static F max(F a, F b) { return _mm512_max_ps(a, b); }
  static float hmax(F a) { return _mm512_reduce_max_ps(a); }
  static F round_h(F a) { return _mm512_cvtph_ps(_mm512_cvtps_ph(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)); }
  // Transposing sum: lane i of the result = sum of a[i]'s lanes. Pairs are interleaved and
  // added within 128-bit lanes (16 -> 8 -> 4 vectors), then 128-bit lanes are added
  // across vectors (4 -> 2 -> 1); lane group g ends up holding sources 4g..4g+3.
  __attribute__((always_inline)) static F reduce(const F (&a)[kLanes]) {
    F c[8];
    for (int p = 0; p < 8; ++p)
      c[p] = _mm512_add_ps(_mm512_unpacklo_ps(a[2 * p], a[2 * p + 1]), _mm512_unpackhi_ps(a[2 * p], a[2 * p + 1]));
    F d[4];
    for (int q = 0; q < 4; ++q) {
      const __m512d x = _mm512_castps_pd(c[2 * q]), y = _mm512_castps_pd(c[2 * q + 1]);
      d[q] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(x, y)), _mm512_castpd_ps(_mm512_unpackhi_pd(x, y)));
    }
    const F u0 = _mm512_add_ps(_mm512_shuffle_f32x4(d[0], d[1], _MM_SHUFFLE(2, 0, 2, 0)),
                               _mm512_shuffle_f32x4(d[0], d[1], _MM_SHUFFLE(3, 1, 3, 1)));
    const F u1 = _mm512_add_ps(_mm512_shuffle_f32x4(d[2], d[3], _MM_SHUFFLE(2, 0, 2, 0)),
                               _mm512_shuffle_f32x4(d[2], d[3], _MM_SHUFFLE(3, 1, 3, 1)));
    return _mm512_add_ps(_mm512_shuffle_f32x4(u0, u1, _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(u0, u1, _MM_SHUFFLE(3, 1, 3, 1)));
  }
  // 16 x 16 transpose in registers: 32-bit, then 64-bit interleaves within 128-bit lanes,
  // then two rounds of 128-bit lane shuffles.
  __attribute__((always_inline)) static void transpose(F (&r)[kLanes]) {
    F t[16];
    for (int p = 0; p < 8; ++p) {
      t[2 * p] = _mm512_unpacklo_ps(r[2 * p], r[2 * p + 1]);
      t[2 * p + 1] = _mm512_unpackhi_ps(r[2 * p], r[2 * p + 1]);
    }
    for (int q = 0; q < 4; ++q) {
      const __m512d a = _mm512_castps_pd(t[4 * q]), b = _mm512_castps_pd(t[4 * q + 2]);
      const __m512d c = _mm512_castps_pd(t[4 * q + 1]), d = _mm512_castps_pd(t[4 * q + 3]);
      r[4 * q + 0] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, b));
      r[4 * q + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, b));
      r[4 * q + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(c, d));
      r[4 * q + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(c, d));
    }
    for (int h = 0; h < 2; ++h)
      for (int k = 0; k < 4; ++k) {
        t[8 * h + k] = _mm512_shuffle_f32x4(r[8 * h + k], r[8 * h + k + 4], 0x88);
        t[8 * h + k + 4] = _mm512_shuffle_f32x4(r[8 * h + k], r[8 * h + k + 4], 0xdd);
      }
    for (int k = 0; k < 8; ++k) {
      r[k] = _mm512_shuffle_f32x4(t[k], t[k + 8], 0x88);
      r[k + 8] = _mm512_shuffle_f32x4(t[k], t[k + 8], 0xdd);
    }
  }
};

}  // namespace

void attend_avx512(const Unit& u) {
  if (u.i8) Attend<V512, true>::run(u);
  else Attend<V512, false>::run(u);
}

}  // namespace pagoda::attn

// Internal: the vector layer for AVX-512 (F, BW, VL, DQ): V512, sixteen float lanes, with
// the members vec_avx2.h lists (the contract is there). Tails are masked loads and
// stores. Include only from *_avx512.cpp / *_avx512bw.cpp files, after
// kernels/simd/simd_intrinsics.h; everything has internal linkage.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace pagoda::simd {
namespace {

struct V512 {
  using F = __m512;
  using D = __m512d;
  using M = __mmask16;
  using DM = __mmask8;
  using I = __m512i;
  static constexpr int kLanes = 16;

  static M first(int64_t r) { return r >= 16 ? static_cast<M>(0xffff) : static_cast<M>((1u << r) - 1u); }

  // ---- memory
  static F zero() { return _mm512_setzero_ps(); }
  static F set1(float x) { return _mm512_set1_ps(x); }
  static F load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, F v) { _mm512_storeu_ps(p, v); }
  static F load_tail(const float* p, int64_t r) { return _mm512_maskz_loadu_ps(first(r), p); }
  static void store_tail(float* p, F v, int64_t r) { _mm512_mask_storeu_ps(p, first(r), v); }
  static F load_h(const uint16_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static F load_h_tail(const uint16_t* p, int64_t r) { return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(first(r), p)); }
  static void store_h(uint16_t* p, F v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  static void store_h_tail(uint16_t* p, F v, int64_t r) {
    _mm256_mask_storeu_epi16(p, first(r), _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  static F widen_bf16(__m256i h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); }
  static F load_bf16(const uint16_t* p) { return widen_bf16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static F load_bf16_tail(const uint16_t* p, int64_t r) { return widen_bf16(_mm256_maskz_loadu_epi16(first(r), p)); }
  // (vcvtneps2bf16 would flush subnormals, so it is not used.)
  static __m256i bf16_of(F v) {
    const __m512i u = _mm512_castps_si512(v);
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                                  _mm512_set1_epi32(0x7f800000));
    const __m512i hi = _mm512_srli_epi32(u, 16);
    const __m512i bias = _mm512_add_epi32(_mm512_set1_epi32(0x7fff), _mm512_and_si512(hi, _mm512_set1_epi32(1)));
    const __m512i r = _mm512_mask_or_epi32(_mm512_srli_epi32(_mm512_add_epi32(u, bias), 16), nan, hi, _mm512_set1_epi32(64));
    return _mm512_cvtepi32_epi16(r);
  }
  static void store_bf16(uint16_t* p, F v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), bf16_of(v)); }
  static void store_bf16_tail(uint16_t* p, F v, int64_t r) { _mm256_mask_storeu_epi16(p, first(r), bf16_of(v)); }
  static F load_i8(const int8_t* p) {
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  }
  static F lookup_h(const uint16_t* table, F x) {
    const __m256i h = _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512i words = _mm512_i32gather_epi32(_mm512_cvtepu16_epi32(h), table, 2);
    return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(words));
  }

  // ---- arithmetic
  static F add(F a, F b) { return _mm512_add_ps(a, b); }
  static F sub(F a, F b) { return _mm512_sub_ps(a, b); }
  static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F div(F a, F b) { return _mm512_div_ps(a, b); }
  static F fma(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static F min(F a, F b) { return _mm512_min_ps(a, b); }
  static F max(F a, F b) { return _mm512_max_ps(a, b); }
  static F fnma(F a, F b, F c) { return _mm512_fnmadd_ps(a, b, c); }
  static F abs(F a) { return _mm512_abs_ps(a); }
  static F copysign(F mag, F sgn) {
    // Bits of mag where the mask (all but the sign) is set, of sgn elsewhere.
    return _mm512_castsi512_ps(_mm512_ternarylogic_epi32(_mm512_set1_epi32(0x7fffffff), _mm512_castps_si512(mag),
                                                         _mm512_castps_si512(sgn), 0xca));
  }
  static F round(F a) { return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  // vscalefps: IEEE overflow to inf and gradual underflow to 0.
  static F scale2(F a, F k) { return _mm512_scalef_ps(a, k); }
  static F round_h(F a) { return _mm512_cvtph_ps(_mm512_cvtps_ph(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)); }

  // ---- lanes
  static M ge(F a, F b) { return _mm512_cmp_ps_mask(a, b, _CMP_GE_OQ); }
  static M le(F a, F b) { return _mm512_cmp_ps_mask(a, b, _CMP_LE_OQ); }
  static M eq(F a, F b) { return _mm512_cmp_ps_mask(a, b, _CMP_EQ_OQ); }
  static F blend(M m, F a, F b) { return _mm512_mask_mov_ps(a, m, b); }
  static uint32_t bits(M m) { return m; }
  static bool any_nan(F a) { return _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q) != 0; }
  static float hmax(F a) { return _mm512_reduce_max_ps(a); }
  static float hsum(F a) { return _mm512_reduce_add_ps(a); }
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

  // ---- doubles
  static D widen_lo(F v) { return _mm512_cvtps_pd(_mm512_castps512_ps256(v)); }
  static D widen_hi(F v) { return _mm512_cvtps_pd(_mm512_extractf32x8_ps(v, 1)); }
  static F narrow(D lo, D hi) { return _mm512_insertf32x8(_mm512_castps256_ps512(_mm512_cvtpd_ps(lo)), _mm512_cvtpd_ps(hi), 1); }
  static D d_zero() { return _mm512_setzero_pd(); }
  static D d_set1(double x) { return _mm512_set1_pd(x); }
  static D d_add(D a, D b) { return _mm512_add_pd(a, b); }
  static D d_sub(D a, D b) { return _mm512_sub_pd(a, b); }
  static D d_mul(D a, D b) { return _mm512_mul_pd(a, b); }
  static D d_div(D a, D b) { return _mm512_div_pd(a, b); }
  static D d_fma(D a, D b, D c) { return _mm512_fmadd_pd(a, b, c); }
  static D d_fnma(D a, D b, D c) { return _mm512_fnmadd_pd(a, b, c); }
  static D d_min(D a, D b) { return _mm512_min_pd(a, b); }
  static D d_max(D a, D b) { return _mm512_max_pd(a, b); }
  static D d_round(D a) { return _mm512_roundscale_pd(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static DM d_lt(D a, D b) { return _mm512_cmp_pd_mask(a, b, _CMP_LT_OQ); }
  static D d_blend(DM m, D a, D b) { return _mm512_mask_mov_pd(a, m, b); }
  static double d_hsum(D a) { return _mm512_reduce_add_pd(a); }
  // 2^(k / 32): the fraction k mod 32 by two 16-entry permutes picked by bit 4, k div 32
  // added to the exponent field.
  static D exp2_k32(D kd, const double* table32) {
    const __m512i k = _mm512_cvtpd_epi64(kd);
    const __m512i lo = _mm512_loadu_si512(table32), hi = _mm512_loadu_si512(table32 + 8);
    const __m512i lo2 = _mm512_loadu_si512(table32 + 16), hi2 = _mm512_loadu_si512(table32 + 24);
    const __m512i t0 = _mm512_permutex2var_epi64(lo, k, hi);
    const __m512i t1 = _mm512_permutex2var_epi64(lo2, k, hi2);
    const __m512i t = _mm512_mask_blend_epi64(_mm512_test_epi64_mask(k, _mm512_set1_epi64(16)), t0, t1);
    return _mm512_castsi512_pd(_mm512_add_epi64(t, _mm512_slli_epi64(_mm512_srai_epi64(k, 5), 52)));
  }

  // ---- integers
  static I bits_of(F v) { return _mm512_castps_si512(v); }
  static I set1_i(int32_t x) { return _mm512_set1_epi32(x); }
  static I i_and(I a, I b) { return _mm512_and_si512(a, b); }
  static I i_sub(I a, I b) { return _mm512_sub_epi32(a, b); }
  static I i_min(I a, I b) { return _mm512_min_epi32(a, b); }
  static int32_t i_hsum(I v) { return _mm512_reduce_add_epi32(v); }
  static void store_bytes(int8_t* p, I v) { _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm512_cvtepi32_epi8(v)); }

  // ---- compress (into a register, then a plain store of all 16 lanes: out must have
  // room for 16. vpcompressd with a memory operand is microcoded on Zen 4, ~10x slower.)
  static int compress(float* out, uint32_t bits, F v) {
    _mm512_storeu_ps(out, _mm512_maskz_compress_ps(static_cast<M>(bits), v));
    return __builtin_popcount(bits);
  }
  static int compress_index(int32_t* out, uint32_t bits, int32_t base) {
    const __m512i lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    _mm512_storeu_si512(out, _mm512_maskz_compress_epi32(static_cast<M>(bits), _mm512_add_epi32(lane, _mm512_set1_epi32(base))));
    return __builtin_popcount(bits);
  }
};

}  // namespace
}  // namespace pagoda::simd

// Internal: the vector layer for AVX2 (+FMA, F16C): V256, eight float lanes. Every SIMD
// body that is written once (attention_body.h, elementwise_body.h, float_body.h,
// vexp.h, activation_body.h) is a template over a V like this one; a target's file
// includes its V header and the body, so the body is compiled once per target. Include
// only from *_avx2.cpp files, after kernels/simd/simd_intrinsics.h: everything has internal
// linkage, so no AVX2 copy can be picked by the linker for code that runs elsewhere.
//
// The contract (V512 in vec_avx512.h has the same members):
//   F, D, M        float vector of kLanes, double vector of kLanes / 2, lane mask of F
//   memory         zero set1 load store, load_tail / store_tail (the first r < kLanes
//                  lanes, zeros after them), load_h / store_h (FP16, nearest even),
//                  load_bf16 / store_bf16 (fp32_to_bf16's bits, NaN quieted with 64),
//                  their _tail forms, load_i8, lookup_h (an FP16 table at fp16(x))
//   arithmetic     add sub mul div fma(a, b, c) = a * b + c, fnma = c - a * b, min /
//                  max (the second operand when either is NaN, as vminps / vmaxps),
//                  abs, copysign(mag, sgn) (mag's magnitude, sgn's sign bit), round
//                  (to nearest even), round_h, scale2(a, k) = a * 2^k
//   lanes          ge le eq (ordered) -> M, blend(m, a, b) = m ? b : a, bits(M),
//                  any_nan, hmax hsum, reduce (lane i = sum of a[i]), transpose
//   doubles        widen_lo / widen_hi (F -> D), narrow(lo, hi), the D arithmetic
//                  d_* (d_lt -> DM, a lane mask of D; d_blend(m, a, b) = m ? b : a)
//                  and exp2_k32 (2^(k / 32) for integral k in [-5120, 4640])
//   integers       I (int32 lanes), bits_of (a bit cast), i_and i_sub i_min i_hsum
//                  set1_i, store_bytes (each lane's low byte, kLanes bytes)
//   compress       compress(out, bits, v) / compress_index(out, bits, base): the lanes
//                  whose bit is set, packed to the front of out (which must have room
//                  for kLanes); returns their count
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace pagoda::simd {
namespace {

struct V256 {
  using F = __m256;
  using D = __m256d;
  using M = __m256;
  using DM = __m256d;
  using I = __m256i;
  static constexpr int kLanes = 8;

  // ---- memory
  static F zero() { return _mm256_setzero_ps(); }
  static F set1(float x) { return _mm256_set1_ps(x); }
  static F load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, F v) { _mm256_storeu_ps(p, v); }
  static F load_tail(const float* p, int64_t r) {
    alignas(32) float b[8] = {};
    std::memcpy(b, p, static_cast<size_t>(r) * sizeof(float));
    return _mm256_load_ps(b);
  }
  static void store_tail(float* p, F v, int64_t r) {
    alignas(32) float b[8];
    _mm256_store_ps(b, v);
    std::memcpy(p, b, static_cast<size_t>(r) * sizeof(float));
  }
  static F load_h(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static F load_h_tail(const uint16_t* p, int64_t r) {
    alignas(16) uint16_t b[8] = {};
    std::memcpy(b, p, static_cast<size_t>(r) * sizeof(uint16_t));
    return load_h(b);
  }
  static void store_h(uint16_t* p, F v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  static void store_h_tail(uint16_t* p, F v, int64_t r) {
    alignas(16) uint16_t b[8];
    store_h(b, v);
    std::memcpy(p, b, static_cast<size_t>(r) * sizeof(uint16_t));
  }
  static F load_bf16(const uint16_t* p) {
    const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
  }
  static F load_bf16_tail(const uint16_t* p, int64_t r) {
    alignas(16) uint16_t b[8] = {};
    std::memcpy(b, p, static_cast<size_t>(r) * sizeof(uint16_t));
    return load_bf16(b);
  }
  static void store_bf16(uint16_t* p, F v) {
    const __m256i u = _mm256_castps_si256(v);
    const __m256i abs = _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff));
    const __m256i nan = _mm256_cmpgt_epi32(abs, _mm256_set1_epi32(0x7f800000));  // abs is non-negative
    const __m256i hi = _mm256_srli_epi32(u, 16);
    const __m256i bias = _mm256_add_epi32(_mm256_set1_epi32(0x7fff), _mm256_and_si256(hi, _mm256_set1_epi32(1)));
    const __m256i r = _mm256_srli_epi32(_mm256_add_epi32(u, bias), 16);
    const __m256i w = _mm256_blendv_epi8(r, _mm256_or_si256(hi, _mm256_set1_epi32(64)), nan);
    // Values are 0..65535, so the unsigned-saturating pack just narrows them.
    const __m128i p16 = _mm_packus_epi32(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), p16);
  }
  static void store_bf16_tail(uint16_t* p, F v, int64_t r) {
    alignas(16) uint16_t b[8];
    store_bf16(b, v);
    std::memcpy(p, b, static_cast<size_t>(r) * sizeof(uint16_t));
  }
  static F load_i8(const int8_t* p) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
  }
  // table[fp16(x)] as floats: a 32-bit gather at 2-byte steps, the low half kept.
  static F lookup_h(const uint16_t* table, F x) {
    const __m128i h = _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256i words = _mm256_i32gather_epi32(reinterpret_cast<const int*>(table), _mm256_cvtepu16_epi32(h), 2);
    words = _mm256_and_si256(words, _mm256_set1_epi32(0xffff));
    return _mm256_cvtph_ps(_mm_packus_epi32(_mm256_castsi256_si128(words), _mm256_extracti128_si256(words, 1)));
  }

  // ---- arithmetic
  static F add(F a, F b) { return _mm256_add_ps(a, b); }
  static F sub(F a, F b) { return _mm256_sub_ps(a, b); }
  static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F div(F a, F b) { return _mm256_div_ps(a, b); }
  static F fma(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  static F min(F a, F b) { return _mm256_min_ps(a, b); }
  static F max(F a, F b) { return _mm256_max_ps(a, b); }
  static F fnma(F a, F b, F c) { return _mm256_fnmadd_ps(a, b, c); }
  static F abs(F a) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), a); }
  static F copysign(F mag, F sgn) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    return _mm256_or_ps(_mm256_andnot_ps(sign, mag), _mm256_and_ps(sign, sgn));
  }
  static F round(F a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  // a * 2^k for integral k in [-151, 129], as two normal powers of two 2^(k >> 1) *
  // 2^(k - (k >> 1)), so overflow and gradual underflow round once, at the end.
  static F scale2(F a, F k) {
    const __m256i ki = _mm256_cvtps_epi32(k);
    const __m256i k1 = _mm256_srai_epi32(ki, 1), k2 = _mm256_sub_epi32(ki, k1);
    const __m256i bias = _mm256_set1_epi32(127);
    const __m256 f1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k1, bias), 23));
    const __m256 f2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k2, bias), 23));
    return _mm256_mul_ps(_mm256_mul_ps(a, f1), f2);
  }
  static F round_h(F a) { return _mm256_cvtph_ps(_mm256_cvtps_ph(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)); }

  // ---- lanes
  static M ge(F a, F b) { return _mm256_cmp_ps(a, b, _CMP_GE_OQ); }
  static M le(F a, F b) { return _mm256_cmp_ps(a, b, _CMP_LE_OQ); }
  static M eq(F a, F b) { return _mm256_cmp_ps(a, b, _CMP_EQ_OQ); }
  static F blend(M m, F a, F b) { return _mm256_blendv_ps(a, b, m); }
  static uint32_t bits(M m) { return static_cast<uint32_t>(_mm256_movemask_ps(m)); }
  static bool any_nan(F a) { return _mm256_movemask_ps(_mm256_cmp_ps(a, a, _CMP_UNORD_Q)) != 0; }
  static float hmax(F a) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
  }
  static float hsum(F a) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  // Transposing sum: lane i of the result = sum of a[i]'s lanes (see vec_avx512.h).
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

  // ---- doubles
  static D widen_lo(F v) { return _mm256_cvtps_pd(_mm256_castps256_ps128(v)); }
  static D widen_hi(F v) { return _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)); }
  static F narrow(D lo, D hi) { return _mm256_insertf128_ps(_mm256_castps128_ps256(_mm256_cvtpd_ps(lo)), _mm256_cvtpd_ps(hi), 1); }
  static D d_zero() { return _mm256_setzero_pd(); }
  static D d_set1(double x) { return _mm256_set1_pd(x); }
  static D d_add(D a, D b) { return _mm256_add_pd(a, b); }
  static D d_sub(D a, D b) { return _mm256_sub_pd(a, b); }
  static D d_mul(D a, D b) { return _mm256_mul_pd(a, b); }
  static D d_div(D a, D b) { return _mm256_div_pd(a, b); }
  static D d_fma(D a, D b, D c) { return _mm256_fmadd_pd(a, b, c); }
  static D d_fnma(D a, D b, D c) { return _mm256_fnmadd_pd(a, b, c); }
  static D d_min(D a, D b) { return _mm256_min_pd(a, b); }
  static D d_max(D a, D b) { return _mm256_max_pd(a, b); }
  static D d_round(D a) { return _mm256_round_pd(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static DM d_lt(D a, D b) { return _mm256_cmp_pd(a, b, _CMP_LT_OQ); }
  static D d_blend(DM m, D a, D b) { return _mm256_blendv_pd(a, b, m); }
  static double d_hsum(D a) {
    __m128d h = _mm_add_pd(_mm256_castpd256_pd128(a), _mm256_extractf128_pd(a, 1));
    return _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)));
  }
  // 2^(k / 32) from a table of the 32 fractions (gathered by k mod 32), with k div 32
  // added to the exponent field.
  static D exp2_k32(D kd, const double* table32) {
    const __m128i k = _mm256_cvtpd_epi32(kd);
    const __m256d t = _mm256_i32gather_pd(table32, _mm_and_si128(k, _mm_set1_epi32(31)), 8);
    const __m256i e = _mm256_slli_epi64(_mm256_cvtepi32_epi64(_mm_srai_epi32(k, 5)), 52);
    return _mm256_castsi256_pd(_mm256_add_epi64(_mm256_castpd_si256(t), e));
  }

  // ---- integers
  static I bits_of(F v) { return _mm256_castps_si256(v); }
  static I set1_i(int32_t x) { return _mm256_set1_epi32(x); }
  static I i_and(I a, I b) { return _mm256_and_si256(a, b); }
  static I i_sub(I a, I b) { return _mm256_sub_epi32(a, b); }
  static I i_min(I a, I b) { return _mm256_min_epi32(a, b); }
  static int32_t i_hsum(I v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
  }
  static void store_bytes(int8_t* p, I v) {
    const __m256i b = _mm256_shuffle_epi8(v, _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
                                                               0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1));
    const uint32_t lo = static_cast<uint32_t>(_mm256_extract_epi32(b, 0));
    const uint32_t hi = static_cast<uint32_t>(_mm256_extract_epi32(b, 4));
    const uint64_t w = lo | (static_cast<uint64_t>(hi) << 32);
    std::memcpy(p, &w, sizeof(w));
  }

  // ---- compress (no compressing store on AVX2: a loop over the set bits)
  static int compress(float* out, uint32_t bits, F v) {
    alignas(32) float b[8];
    _mm256_store_ps(b, v);
    int c = 0;
    for (; bits != 0; bits &= bits - 1) out[c++] = b[__builtin_ctz(bits)];
    return c;
  }
  static int compress_index(int32_t* out, uint32_t bits, int32_t base) {
    int c = 0;
    for (; bits != 0; bits &= bits - 1) out[c++] = base + __builtin_ctz(bits);
    return c;
  }
};

}  // namespace
}  // namespace pagoda::simd

// Internal: expf over a row of floats in vectors, bit-identical to libm's expf, for the
// softmax of the attention bodies (attention_body.h), elementwise softmax and exp_inplace.
// Included by the *_avx2.cpp / *_avx512.cpp files only; everything has internal linkage.
//
// Why the results are libm's, bit for bit: each value is evaluated in double precision
// (below), accurate to a relative 2^-48. A libm expf whose result before its final
// rounding to float is within 2^-32 of e^x (glibc's: 1.69 * 2^-34 for its polynomial,
// ~2^-33 all told; a correctly rounded one: 0) rounds a value inside y(1 +- 2^-31), y our
// double result. When both ends of that band round to the same float F, so does libm's
// value: F is the answer. When they do not (a rounding boundary lies within 2^-31 of y,
// about 1% of inputs) that value is recomputed by expf itself, after the vector pass so
// the loop has no data-dependent branch. Special inputs fall out the same way: huge
// results convert to inf at both ends, tiny ones to 0, NaN compares unequal and goes to
// expf. (Checked against glibc 2.36 for all 2^32 inputs, on both targets.)
//
// The double evaluation (Tang's table method): k = round(x 32 / ln 2), r = x - k ln2/32
// with ln2/32 split in two (k ln2_hi exact), |r| <= ln2/64; e^r by its Taylor series to
// degree 5 (truncation 2^-48.7, Estrin's scheme); e^x = 2^(k/32) e^r with 2^(k mod 32 / 32)
// from a table of 32 doubles and 2^(k div 32) added to the exponent field (k div 32 stays
// within [-160, 145] for the clamped x, so the result is a normal double).
#pragma once

#include <immintrin.h>
#include <math.h>

#include <cstdint>

namespace pagoda::attn {
namespace {

constexpr double kInvLn2x32 = 46.16624130844683;        // 32 / ln 2
constexpr double kLn2x32Hi = 0x1.62e42fefa4p-6;          // ln2 / 32 to 39 bits: k * hi exact, |k| < 2^13
constexpr double kLn2x32Lo = -0x1.8432a1b0e2634p-48;     // ln2 / 32 - hi
constexpr double kBand = 0x1p-31;
// 2^(i / 32), correctly rounded.
alignas(64) constexpr double kExp2Table[32] = {
    0x1.0000000000000p+0, 0x1.059b0d3158574p+0, 0x1.0b5586cf9890fp+0, 0x1.11301d0125b51p+0,
    0x1.172b83c7d517bp+0, 0x1.1d4873168b9aap+0, 0x1.2387a6e756238p+0, 0x1.29e9df51fdee1p+0,
    0x1.306fe0a31b715p+0, 0x1.371a7373aa9cbp+0, 0x1.3dea64c123422p+0, 0x1.44e086061892dp+0,
    0x1.4bfdad5362a27p+0, 0x1.5342b569d4f82p+0, 0x1.5ab07dd485429p+0, 0x1.6247eb03a5585p+0,
    0x1.6a09e667f3bcdp+0, 0x1.71f75e8ec5f74p+0, 0x1.7a11473eb0187p+0, 0x1.82589994cce13p+0,
    0x1.8ace5422aa0dbp+0, 0x1.93737b0cdc5e5p+0, 0x1.9c49182a3f090p+0, 0x1.a5503b23e255dp+0,
    0x1.ae89f995ad3adp+0, 0x1.b7f76f2fb5e47p+0, 0x1.c199bdd85529cp+0, 0x1.cb720dcef9069p+0,
    0x1.d5818dcfba487p+0, 0x1.dfc97337b9b5fp+0, 0x1.ea4afa2a490dap+0, 0x1.f50765b6e4540p+0};

#if defined(__AVX512F__)

// e^x for 8 lanes in double; x already clamped to [-110, 100] (NaN kept).
inline __m512d exp_pd(__m512d x) {
  const __m512d kd = _mm512_roundscale_pd(_mm512_mul_pd(x, _mm512_set1_pd(kInvLn2x32)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512d r = _mm512_fnmadd_pd(kd, _mm512_set1_pd(kLn2x32Hi), x);
  r = _mm512_fnmadd_pd(kd, _mm512_set1_pd(kLn2x32Lo), r);
  const __m512d r2 = _mm512_mul_pd(r, r);
  const __m512d a = _mm512_fmadd_pd(r, _mm512_set1_pd(1.0 / 6), _mm512_set1_pd(0.5));
  const __m512d b = _mm512_fmadd_pd(r, _mm512_set1_pd(1.0 / 120), _mm512_set1_pd(1.0 / 24));
  const __m512d p = _mm512_fmadd_pd(r2, _mm512_fmadd_pd(r2, b, a), _mm512_add_pd(r, _mm512_set1_pd(1.0)));
  const __m512i k = _mm512_cvtpd_epi64(kd);
  const __m512i lo = _mm512_load_si512(kExp2Table), hi = _mm512_load_si512(kExp2Table + 8);
  const __m512i lo2 = _mm512_load_si512(kExp2Table + 16), hi2 = _mm512_load_si512(kExp2Table + 24);
  // Entry k mod 32: two 16-entry permutes, picked by bit 4.
  const __m512i t0 = _mm512_permutex2var_epi64(lo, k, hi);
  const __m512i t1 = _mm512_permutex2var_epi64(lo2, k, hi2);
  const __m512i t = _mm512_mask_blend_epi64(_mm512_test_epi64_mask(k, _mm512_set1_epi64(16)), t0, t1);
  const __m512i s = _mm512_add_epi64(t, _mm512_slli_epi64(_mm512_srai_epi64(k, 5), 52));
  return _mm512_mul_pd(p, _mm512_castsi512_pd(s));
}

// Candidates for 16 floats: expf of each lane where `sure` has its bit set.
inline __m512 expf16(__m512 xf, __mmask16* sure) {
  const __m512d lim_lo = _mm512_set1_pd(-110.0), lim_hi = _mm512_set1_pd(100.0);
  const __m512d xa = _mm512_max_pd(lim_lo, _mm512_min_pd(lim_hi, _mm512_cvtps_pd(_mm512_castps512_ps256(xf))));
  const __m512d xb = _mm512_max_pd(lim_lo, _mm512_min_pd(lim_hi, _mm512_cvtps_pd(_mm512_extractf32x8_ps(xf, 1))));
  const __m512d ya = exp_pd(xa), yb = exp_pd(xb);
  const __m512d down = _mm512_set1_pd(1.0 - kBand), up = _mm512_set1_pd(1.0 + kBand);
  const __m512 lo = _mm512_insertf32x8(_mm512_castps256_ps512(_mm512_cvtpd_ps(_mm512_mul_pd(ya, down))),
                                       _mm512_cvtpd_ps(_mm512_mul_pd(yb, down)), 1);
  const __m512 hi = _mm512_insertf32x8(_mm512_castps256_ps512(_mm512_cvtpd_ps(_mm512_mul_pd(ya, up))),
                                       _mm512_cvtpd_ps(_mm512_mul_pd(yb, up)), 1);
  *sure = _mm512_cmp_ps_mask(lo, hi, _CMP_EQ_OQ);
  return lo;
}

// x[i] = expf(x[i] - m) for i < n (the difference rounded to float first, as the scalar
// code does); returns the sum of the new x[i] in double (in an order of its own).
inline double exp_shifted_sum(float* x, int64_t n, float m) {
  constexpr int kFixCap = 256;
  alignas(64) int32_t fix_at[kFixCap + 16];
  alignas(64) float fix_in[kFixCap + 16];
  int n_fix = 0;
  const __m512 vm = _mm512_set1_ps(m);
  const __m512i lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 valid = n - i >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << (n - i)) - 1u);
    const __m512 in = _mm512_sub_ps(_mm512_maskz_loadu_ps(valid, x + i), vm);
    __mmask16 sure;
    _mm512_mask_storeu_ps(x + i, valid, expf16(in, &sure));
    const __mmask16 redo = static_cast<__mmask16>(valid & ~sure);
    _mm512_mask_compressstoreu_epi32(fix_at + n_fix, redo, _mm512_add_epi32(lane, _mm512_set1_epi32(static_cast<int32_t>(i))));
    _mm512_mask_compressstoreu_ps(fix_in + n_fix, redo, in);
    n_fix += __builtin_popcount(redo);
    if (n_fix > kFixCap) {
      for (int f = 0; f < n_fix; ++f) x[fix_at[f]] = expf(fix_in[f]);
      n_fix = 0;
    }
  }
  for (int f = 0; f < n_fix; ++f) x[fix_at[f]] = expf(fix_in[f]);
  __m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 valid = n - i >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << (n - i)) - 1u);
    const __m512 v = _mm512_maskz_loadu_ps(valid, x + i);
    s0 = _mm512_add_pd(s0, _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
    s1 = _mm512_add_pd(s1, _mm512_cvtps_pd(_mm512_extractf32x8_ps(v, 1)));
  }
  return _mm512_reduce_add_pd(_mm512_add_pd(s0, s1));
}

#elif defined(__AVX2__)

inline __m256d exp_pd(__m256d x) {
  const __m256d kd = _mm256_round_pd(_mm256_mul_pd(x, _mm256_set1_pd(kInvLn2x32)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256d r = _mm256_fnmadd_pd(kd, _mm256_set1_pd(kLn2x32Hi), x);
  r = _mm256_fnmadd_pd(kd, _mm256_set1_pd(kLn2x32Lo), r);
  const __m256d r2 = _mm256_mul_pd(r, r);
  const __m256d a = _mm256_fmadd_pd(r, _mm256_set1_pd(1.0 / 6), _mm256_set1_pd(0.5));
  const __m256d b = _mm256_fmadd_pd(r, _mm256_set1_pd(1.0 / 120), _mm256_set1_pd(1.0 / 24));
  const __m256d p = _mm256_fmadd_pd(r2, _mm256_fmadd_pd(r2, b, a), _mm256_add_pd(r, _mm256_set1_pd(1.0)));
  const __m128i k = _mm256_cvtpd_epi32(kd);
  const __m256d t = _mm256_i32gather_pd(kExp2Table, _mm_and_si128(k, _mm_set1_epi32(31)), 8);
  const __m256i e = _mm256_slli_epi64(_mm256_cvtepi32_epi64(_mm_srai_epi32(k, 5)), 52);
  return _mm256_mul_pd(p, _mm256_castsi256_pd(_mm256_add_epi64(_mm256_castpd_si256(t), e)));
}

// Candidates for 4 floats and the mask of lanes that are certainly libm's.
inline __m128 expf4(__m128 xf, int* sure) {
  __m256d x = _mm256_cvtps_pd(xf);
  x = _mm256_max_pd(_mm256_set1_pd(-110.0), _mm256_min_pd(_mm256_set1_pd(100.0), x));
  const __m256d y = exp_pd(x);
  const __m128 lo = _mm256_cvtpd_ps(_mm256_mul_pd(y, _mm256_set1_pd(1.0 - kBand)));
  const __m128 hi = _mm256_cvtpd_ps(_mm256_mul_pd(y, _mm256_set1_pd(1.0 + kBand)));
  *sure = _mm_movemask_ps(_mm_cmp_ps(lo, hi, _CMP_EQ_OQ));
  return lo;
}

inline double exp_shifted_sum(float* x, int64_t n, float m) {
  const __m128 vm = _mm_set1_ps(m);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const __m128 in = _mm_sub_ps(_mm_loadu_ps(x + i), vm);
    int sure;
    _mm_storeu_ps(x + i, expf4(in, &sure));
    if (sure != 0xf) {
      alignas(16) float v[4];
      _mm_store_ps(v, in);
      for (int l = 0; l < 4; ++l)
        if (((sure >> l) & 1) == 0) x[i + l] = expf(v[l]);
    }
  }
  for (; i < n; ++i) x[i] = expf(x[i] - m);
  __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
  i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
    s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
  }
  const __m256d s = _mm256_add_pd(s0, s1);
  __m128d h = _mm_add_pd(_mm256_castpd256_pd128(s), _mm256_extractf128_pd(s, 1));
  double sum = _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)));
  for (; i < n; ++i) sum += x[i];
  return sum;
}

#endif

}  // namespace
}  // namespace pagoda::attn

// Internal: the vector exp, written once over the vector layer (vec_avx2.h), in two
// accuracies. exp_shifted_sum: expf over a row, bit-identical to libm's expf, for
// attention's softmax (attention_body.h) and the elementwise softmax and exp. exp_fast:
// within 1 ulp of expf for one vector, 4x cheaper, for SwiGLU's gate, where ggml too uses
// an approximate exp and the bits matter less than the time (prefill evaluates it for
// every FFN activation).
// Included by the *_avx2.cpp / *_avx512.cpp files only, after their V header;
// everything has internal linkage.
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

#include <math.h>

#include <cstdint>

namespace pagoda::simd {
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

// e^x = 2^k e^r with k = round(x / ln 2) and r = x - k ln 2 (ln 2 split in two so k ln2_hi
// is exact), |r| <= ln(2) / 2; e^r by its Taylor series to degree 7 (truncation below 0.1
// ulp); V::scale2 applies 2^k with overflow to inf and gradual underflow to 0. Within 1
// ulp of glibc's expf wherever the result is a normal float (checked over every float
// input in [-87, 88]: 99.5% identical); NaN stays NaN.
template <class V>
inline typename V::F exp_fast(typename V::F x) {
  using F = typename V::F;
  x = V::max(V::set1(-104.0f), V::min(V::set1(89.0f), x));
  const F k = V::round(V::mul(x, V::set1(1.44269504088896341f)));
  F r = V::fnma(k, V::set1(0.693359375f), x);
  r = V::fnma(k, V::set1(-2.12194440e-4f), r);
  F p = V::set1(1.0f / 5040.0f);
  p = V::fma(p, r, V::set1(1.0f / 720.0f));
  p = V::fma(p, r, V::set1(1.0f / 120.0f));
  p = V::fma(p, r, V::set1(1.0f / 24.0f));
  p = V::fma(p, r, V::set1(1.0f / 6.0f));
  p = V::fma(p, r, V::set1(0.5f));
  p = V::fma(p, r, V::set1(1.0f));
  p = V::fma(p, r, V::set1(1.0f));
  return V::scale2(p, k);
}

// e^x for the lanes of a double vector; x already clamped to [-110, 100] (NaN kept).
template <class V>
inline typename V::D exp_pd(typename V::D x) {
  using D = typename V::D;
  const D kd = V::d_round(V::d_mul(x, V::d_set1(kInvLn2x32)));
  D r = V::d_fnma(kd, V::d_set1(kLn2x32Hi), x);
  r = V::d_fnma(kd, V::d_set1(kLn2x32Lo), r);
  const D r2 = V::d_mul(r, r);
  const D a = V::d_fma(r, V::d_set1(1.0 / 6), V::d_set1(0.5));
  const D b = V::d_fma(r, V::d_set1(1.0 / 120), V::d_set1(1.0 / 24));
  const D p = V::d_fma(r2, V::d_fma(r2, b, a), V::d_add(r, V::d_set1(1.0)));
  return V::d_mul(p, V::exp2_k32(kd, kExp2Table));
}

// Candidates for the lanes of xf, and in *sure the lanes that are certainly libm's expf.
template <class V>
inline typename V::F expf_candidates(typename V::F xf, uint32_t* sure) {
  using D = typename V::D;
  const D lim_lo = V::d_set1(-110.0), lim_hi = V::d_set1(100.0);
  const D ya = exp_pd<V>(V::d_max(lim_lo, V::d_min(lim_hi, V::widen_lo(xf))));
  const D yb = exp_pd<V>(V::d_max(lim_lo, V::d_min(lim_hi, V::widen_hi(xf))));
  const D down = V::d_set1(1.0 - kBand), up = V::d_set1(1.0 + kBand);
  const typename V::F lo = V::narrow(V::d_mul(ya, down), V::d_mul(yb, down));
  const typename V::F hi = V::narrow(V::d_mul(ya, up), V::d_mul(yb, up));
  *sure = V::bits(V::eq(lo, hi));
  return lo;
}

// One vector's results and, for the lanes not known to be exact (sure bit clear), the
// input the scalar fallback recomputes them from.
template <class V>
struct Candidates {
  typename V::F out;
  typename V::F fix_in;
  uint32_t sure;
};

// x[i] = f(x[i]) for i < n with a vector pass vec(loaded lanes) -> Candidates whose
// unsure lanes are collected (compressed, no branch per vector) and recomputed afterwards
// by scalar(fix_in); so the result is scalar's bit for bit, at the vector's speed. The
// shared scaffolding of exp_shifted_sum and vtanh.h's softcap_row.
template <class V, class Vec, class Scalar>
inline void map_with_fixups(float* x, int64_t n, const Vec& vec, const Scalar& scalar) {
  constexpr int L = V::kLanes;
  constexpr int kFixCap = 256;
  alignas(64) int32_t fix_at[kFixCap + L];
  alignas(64) float fix_in[kFixCap + L];
  int n_fix = 0;
  const uint32_t all = (1u << L) - 1u;
  auto fix = [&] {
    for (int f = 0; f < n_fix; ++f) x[fix_at[f]] = scalar(fix_in[f]);
    n_fix = 0;
  };
  for (int64_t i = 0; i < n; i += L) {
    const bool whole = n - i >= L;
    const Candidates<V> c = vec(whole ? V::load(x + i) : V::load_tail(x + i, n - i));
    if (whole) V::store(x + i, c.out);
    else V::store_tail(x + i, c.out, n - i);
    const uint32_t valid = whole ? all : (1u << (n - i)) - 1u;
    const uint32_t redo = valid & ~c.sure;
    V::compress_index(fix_at + n_fix, redo, static_cast<int32_t>(i));
    n_fix += V::compress(fix_in + n_fix, redo, c.fix_in);
    if (n_fix > kFixCap) fix();
  }
  fix();
}

// x[i] = expf(x[i] - m) for i < n (the difference rounded to float first, as the scalar
// code does), libm's bits (map_with_fixups). With kSum, returns the sum of the new x[i]
// in double (in an order of its own), else 0.
template <class V, bool kSum = true>
inline double exp_shifted_sum(float* x, int64_t n, float m) {
  using F = typename V::F;
  constexpr int L = V::kLanes;
  const F vm = V::set1(m);
  map_with_fixups<V>(
      x, n,
      [&](F v) {
        Candidates<V> c;
        c.fix_in = V::sub(v, vm);
        c.out = expf_candidates<V>(c.fix_in, &c.sure);
        return c;
      },
      [](float in) { return expf(in); });
  if constexpr (!kSum) return 0.0;
  typename V::D s0 = V::d_zero(), s1 = V::d_zero();
  for (int64_t i = 0; i < n; i += L) {
    const F v = n - i >= L ? V::load(x + i) : V::load_tail(x + i, n - i);
    s0 = V::d_add(s0, V::widen_lo(v));
    s1 = V::d_add(s1, V::widen_hi(v));
  }
  return V::d_hsum(V::d_add(s0, s1));
}

}  // namespace
}  // namespace pagoda::simd

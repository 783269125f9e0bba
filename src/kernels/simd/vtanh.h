// Internal: soft-capping in vectors, x = cap * tanh(x / cap), as llama.cpp caps Gemma 2's
// attention scores and logits (ggml_scale by the float 1 / cap, tanh, ggml_scale by cap).
// Written once over the vector layer, for attention_body.h and elementwise_body.h;
// included by the *_avx2.cpp / *_avx512.cpp files only, after their V header; everything
// has internal linkage.
//
// The tanh is the correctly rounded one: the float of libm's double tanh, which is what
// the scalar bodies compute (elementwise.h's softcap), so every body gives the same bits.
// (ggml calls glibc's tanhf, which is within 2 ulp of that: 2.8% of inputs differ.)
// Why the vector results are those bits: each tanh is evaluated in double precision to a
// relative 2^-44 (below), and libm's double tanh is within a few double ulp of the true
// value; so when y(1 - 2^-31) and y(1 + 2^-31), y our double result, round to the same
// float, libm's value does too. The lanes where they do not (a float rounding boundary
// within 2^-31 of y, about one input in 10^6) are recomputed with libm's tanh after the
// vector pass, as vexp.h does for expf. NaN fails the comparison and goes to libm too.
//
// The double evaluation of tanh(a), a = |y| clamped to 10 (tanh(10) rounds to 1, as do
// all larger values): below a = 1/16 the odd Taylor series to a^9 (truncation under
// 2^-46); above, (1 - e) / (1 + e) with e = e^(-2a) from vexp.h's exp_pd (relative error
// 2^-48, at most 8x larger in 1 - e >= 0.117). The sign is y's, so tanh(-0) = -0.
#pragma once

#include <math.h>

#include <cstdint>

#include "kernels/simd/vexp.h"

namespace pagoda::simd {
namespace {

// tanh of the lanes of a (a >= 0 and a <= 10, or NaN), to a relative 2^-44.
template <class V>
inline typename V::D tanh_pd(typename V::D a) {
  using D = typename V::D;
  const D a2 = V::d_mul(a, a);
  D p = V::d_fma(a2, V::d_set1(62.0 / 2835), V::d_set1(-17.0 / 315));
  p = V::d_fma(a2, p, V::d_set1(2.0 / 15));
  p = V::d_fma(a2, p, V::d_set1(-1.0 / 3));
  const D series = V::d_fma(V::d_mul(a, a2), p, a);
  const D e = exp_pd<V>(V::d_mul(a, V::d_set1(-2.0)));
  const D one = V::d_set1(1.0);
  const D ratio = V::d_div(V::d_sub(one, e), V::d_add(one, e));
  return V::d_blend(V::d_lt(a, V::d_set1(0.0625)), ratio, series);
}

// x[i] = float(tanh(double(x[i] * (1 / cap)))) * cap for i < n: the scalar softcap's bits.
template <class V>
inline void softcap_row(float* x, int64_t n, float cap) {
  using F = typename V::F;
  const float inv = 1.0f / cap;
  const F vinv = V::set1(inv), vcap = V::set1(cap), ten = V::set1(10.0f);
  const typename V::D down = V::d_set1(1.0 - kBand), up = V::d_set1(1.0 + kBand);
  map_with_fixups<V>(
      x, n,
      [&](F v) {
        Candidates<V> c;
        c.fix_in = V::mul(v, vinv);
        const F a = V::min(ten, V::abs(c.fix_in));  // NaN stays NaN (min returns its second operand)
        const typename V::D ta = tanh_pd<V>(V::widen_lo(a)), tb = tanh_pd<V>(V::widen_hi(a));
        const F lo = V::narrow(V::d_mul(ta, down), V::d_mul(tb, down));
        const F hi = V::narrow(V::d_mul(ta, up), V::d_mul(tb, up));
        c.out = V::mul(V::copysign(lo, c.fix_in), vcap);
        c.sure = V::bits(V::eq(lo, hi));
        return c;
      },
      [cap](float y) { return static_cast<float>(tanh(static_cast<double>(y))) * cap; });
}

}  // namespace
}  // namespace pagoda::simd

// Internal: the SIMD elementwise kernels (elementwise.h says what they may change against
// the scalar bodies), written once over a vector layer V (vec_avx2.h) and included by
// elementwise_avx2.cpp and elementwise_avx512.cpp after their V header. A row's last
// n % kLanes values go through V's tail loads and stores, so they take the same vector
// arithmetic as the rest. Everything has internal linkage.
#pragma once

#include <math.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/elementwise/elementwise.h"
#include "kernels/simd/vexp.h"
#include "kernels/simd/vtanh.h"

namespace pagoda::simd {
namespace {

template <class V>
struct Elementwise {
  using F = typename V::F;
  using D = typename V::D;
  static constexpr int L = V::kLanes;

  static F load(const float* p, int64_t left) { return left >= L ? V::load(p) : V::load_tail(p, left); }
  static void store(float* p, F v, int64_t left) {
    if (left >= L) V::store(p, v);
    else V::store_tail(p, v, left);
  }

  static void rms_norm(const float* x, const float* w, int64_t n, float eps, float* out) {
    // Squares in float, summed in double (four vectors of partial sums).
    D s0 = V::d_zero(), s1 = V::d_zero(), s2 = V::d_zero(), s3 = V::d_zero();
    int64_t i = 0;
    for (; i + 2 * L <= n; i += 2 * L) {
      const F a = V::load(x + i), b = V::load(x + i + L);
      const F aa = V::mul(a, a), bb = V::mul(b, b);
      s0 = V::d_add(s0, V::widen_lo(aa));
      s1 = V::d_add(s1, V::widen_hi(aa));
      s2 = V::d_add(s2, V::widen_lo(bb));
      s3 = V::d_add(s3, V::widen_hi(bb));
    }
    for (; i < n; i += L) {
      const F a = load(x + i, n - i);
      const F aa = V::mul(a, a);
      s0 = V::d_add(s0, V::widen_lo(aa));
      s1 = V::d_add(s1, V::widen_hi(aa));
    }
    const double sum = V::d_hsum(V::d_add(V::d_add(s0, s1), V::d_add(s2, s3)));
    const float mean = static_cast<float>(sum / static_cast<double>(n));
    const float scale = 1.0f / sqrtf(mean + eps);
    const F vs = V::set1(scale);
    for (i = 0; i < n; i += L) {
      F o = V::mul(load(x + i, n - i), vs);
      if (w != nullptr) o = V::mul(o, load(w + i, n - i));
      store(out + i, o, n - i);
    }
  }

  // ggml's norm in layer_norm_scalar's float steps; only the order of the two double sums
  // differs (two vectors of partial sums each).
  static void layer_norm(const float* x, const float* w, const float* b, int64_t n, float eps, float* out) {
    D s0 = V::d_zero(), s1 = V::d_zero();
    for (int64_t i = 0; i < n; i += L) {
      const F a = load(x + i, n - i);
      s0 = V::d_add(s0, V::widen_lo(a));
      s1 = V::d_add(s1, V::widen_hi(a));
    }
    const float mean = static_cast<float>(V::d_hsum(V::d_add(s0, s1))) / static_cast<float>(n);
    const F vm = V::set1(mean);
    s0 = V::d_zero();
    s1 = V::d_zero();
    for (int64_t i = 0; i < n; i += L) {
      F d = V::sub(load(x + i, n - i), vm);
      if (n - i < L) {
        // The tail's lanes past n loaded as zeros: their (0 - mean)^2 must not count, so
        // only its first n - i lanes come back.
        alignas(64) float t[L];
        V::store_tail(t, d, n - i);
        d = V::load_tail(t, n - i);
      }
      const F dd = V::mul(d, d);
      s0 = V::d_add(s0, V::widen_lo(dd));
      s1 = V::d_add(s1, V::widen_hi(dd));
    }
    const float variance = static_cast<float>(V::d_hsum(V::d_add(s0, s1)) / static_cast<double>(n));
    const F vs = V::set1(1.0f / sqrtf(variance + eps));
    for (int64_t i = 0; i < n; i += L) {
      F o = V::mul(V::sub(load(x + i, n - i), vm), vs);
      if (w != nullptr) o = V::mul(o, load(w + i, n - i));
      if (b != nullptr) o = V::add(o, load(b + i, n - i));
      store(out + i, o, n - i);
    }
  }

  // silu(g) * b with exp_fast (within 1 ulp of expf), so within a few ulp of the scalar
  // body.
  static void swiglu(float* a, const float* b, int64_t n) {
    const F one = V::set1(1.0f);
    for (int64_t i = 0; i < n; i += L) {
      const F g = load(a + i, n - i);
      const F s = V::div(g, V::add(one, exp_fast<V>(V::sub(V::zero(), g))));
      store(a + i, V::mul(s, load(b + i, n - i)), n - i);
    }
  }

  // The table lookup of gelu_fp16_table in vectors: V::lookup_h rounds like fp32_to_fp16.
  static F gelu(const uint16_t* table, F x) {
    const F g = V::blend(V::ge(x, V::set1(10.0f)), V::lookup_h(table, x), x);
    return V::blend(V::le(x, V::set1(-10.0f)), g, V::zero());
  }

  static void geglu(float* a, const float* b, int64_t n) {
    const uint16_t* table = gelu_fp16_table_data();
    for (int64_t i = 0; i < n; i += L) store(a + i, V::mul(gelu(table, load(a + i, n - i)), load(b + i, n - i)), n - i);
  }

  static void gelu_row(float* a, int64_t n) {
    const uint16_t* table = gelu_fp16_table_data();
    for (int64_t i = 0; i < n; i += L) store(a + i, gelu(table, load(a + i, n - i)), n - i);
  }

  // Max and scaling in vectors; exp is libm's expf bit for bit (vexp.h).
  static void softmax(float* x, int64_t n) {
    F mv = V::set1(-INFINITY);
    int64_t i = 0;
    for (; i + L <= n; i += L) mv = V::max(V::load(x + i), mv);
    float mx = V::hmax(mv);
    for (; i < n; ++i) mx = mx < x[i] ? x[i] : mx;
    const double sum = exp_shifted_sum<V>(x, n, mx);
    const F inv = V::set1(static_cast<float>(1.0 / sum));
    for (i = 0; i < n; i += L) store(x + i, V::mul(load(x + i, n - i), inv), n - i);
  }

  // Three passes over a row that stays in cache: the max (and whether any value is NaN),
  // the sum of exp_fast(x - max) in float lanes folded into a double every 256 values,
  // and the first index holding the max.
  static double log_sum_exp(const float* x, int64_t n, int32_t* argmax) {
    F mv = V::set1(-INFINITY);
    bool nan = false;
    int64_t i = 0;
    for (; i + L <= n; i += L) {
      const F v = V::load(x + i);
      nan |= V::any_nan(v);
      mv = V::max(v, mv);
    }
    float mx = i > 0 ? V::hmax(mv) : -INFINITY;
    for (; i < n; ++i) {
      nan |= std::isnan(x[i]);
      mx = mx < x[i] ? x[i] : mx;
    }
    if (argmax) {
      *argmax = 0;
      if (mx > -INFINITY) {
        const F target = V::set1(mx);
        int64_t j = 0;
        for (; j + L <= n; j += L) {
          const uint32_t hit = V::bits(V::eq(V::load(x + j), target));
          if (hit != 0) break;
        }
        for (; j < n; ++j)
          if (x[j] == mx) break;
        *argmax = static_cast<int32_t>(j < n ? j : 0);
      }
    }
    if (nan) return NAN;
    if (!(mx > -INFINITY)) return -INFINITY;
    const F shift = V::set1(mx);
    double sum = 0.0;
    constexpr int64_t kBlock = 256;
    for (int64_t b = 0; b < n; b += kBlock) {
      const int64_t e = std::min(n, b + kBlock);
      F acc0 = V::zero(), acc1 = V::zero();
      int64_t j = b;
      for (; j + 2 * L <= e; j += 2 * L) {
        acc0 = V::add(acc0, exp_fast<V>(V::sub(V::load(x + j), shift)));
        acc1 = V::add(acc1, exp_fast<V>(V::sub(V::load(x + j + L), shift)));
      }
      if (j + L <= e) {
        acc0 = V::add(acc0, exp_fast<V>(V::sub(V::load(x + j), shift)));
        j += L;
      }
      double tail = 0.0;
      for (; j < e; ++j) tail += std::exp(static_cast<double>(x[j] - mx));
      sum += tail;
      sum += static_cast<double>(V::hsum(V::add(acc0, acc1)));
    }
    return static_cast<double>(mx) + std::log(sum);
  }

  static void add(float* a, const float* b, int64_t n) {
    for (int64_t i = 0; i < n; i += L) store(a + i, V::add(load(a + i, n - i), load(b + i, n - i)), n - i);
  }

  static void scale(float* a, float s, int64_t n) {
    const F vs = V::set1(s);
    for (int64_t i = 0; i < n; i += L) store(a + i, V::mul(load(a + i, n - i), vs), n - i);
  }

  static void exp(float* x, int64_t n) { exp_shifted_sum<V, false>(x, n, 0.0f); }

  static void softcap(float* x, float cap, int64_t n) { softcap_row<V>(x, n, cap); }

  static void fill(ElementwiseKernels& k) {
    k.rms_norm = rms_norm;
    k.layer_norm = layer_norm;
    k.swiglu = swiglu;
    k.geglu = geglu;
    k.gelu = gelu_row;
    k.softmax = softmax;
    k.log_sum_exp = log_sum_exp;
    k.add = add;
    k.scale = scale;
    k.exp = exp;
    k.softcap = softcap;
  }
};

}  // namespace
}  // namespace pagoda::simd

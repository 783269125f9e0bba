// avx2 bodies of the elementwise kernels (elementwise.h says what may differ from the
// scalar bodies). Compiled for avx2 (+FMA, F16C) only and called only when the CPU has it.
// Everything here has internal linkage and calls no inline function of a shared header.
// The last n % 8 values of a row go through a zero-padded copy, so they take the same
// vector arithmetic as the rest.
#include "kernels/simd_intrinsics.h"
#include <math.h>

#include <cstdint>
#include <cstring>

#include "kernels/attention_expf.h"
#include "kernels/elementwise.h"

namespace pagoda::simd {
namespace {

struct Tail {
  alignas(32) float v[8];
  Tail(const float* p, int64_t r) {
    std::memset(v, 0, sizeof(v));
    std::memcpy(v, p, static_cast<size_t>(r) * sizeof(float));
  }
  __m256 load() const { return _mm256_load_ps(v); }
};
inline void store_tail(float* p, __m256 x, int64_t r) {
  alignas(32) float v[8];
  _mm256_store_ps(v, x);
  std::memcpy(p, v, static_cast<size_t>(r) * sizeof(float));
}

// As elementwise_avx512.cpp's exp_ps; 2^k is applied as two normal powers of two
// 2^(k >> 1) * 2^(k - (k >> 1)), so overflow and gradual underflow round once at the end.
inline __m256 exp_ps(__m256 x) {
  x = _mm256_max_ps(_mm256_set1_ps(-104.0f), _mm256_min_ps(_mm256_set1_ps(89.0f), x));
  const __m256 k = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(k, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.0f / 5040.0f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  const __m256i ki = _mm256_cvtps_epi32(k);
  const __m256i k1 = _mm256_srai_epi32(ki, 1), k2 = _mm256_sub_epi32(ki, k1);
  const __m256i bias = _mm256_set1_epi32(127);
  const __m256 f1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k1, bias), 23));
  const __m256 f2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k2, bias), 23));
  return _mm256_mul_ps(_mm256_mul_ps(p, f1), f2);
}

inline __m256d widen_lo(__m256 v) { return _mm256_cvtps_pd(_mm256_castps256_ps128(v)); }
inline __m256d widen_hi(__m256 v) { return _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)); }

void rms_norm(const float* x, const float* w, int64_t n, float eps, float* out) {
  // Squares in float, summed in double (four vectors of partial sums).
  __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd(), s2 = _mm256_setzero_pd(), s3 = _mm256_setzero_pd();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + i + 8);
    const __m256 aa = _mm256_mul_ps(a, a), bb = _mm256_mul_ps(b, b);
    s0 = _mm256_add_pd(s0, widen_lo(aa));
    s1 = _mm256_add_pd(s1, widen_hi(aa));
    s2 = _mm256_add_pd(s2, widen_lo(bb));
    s3 = _mm256_add_pd(s3, widen_hi(bb));
  }
  for (; i < n; i += 8) {
    const __m256 a = n - i >= 8 ? _mm256_loadu_ps(x + i) : Tail(x + i, n - i).load();
    const __m256 aa = _mm256_mul_ps(a, a);
    s0 = _mm256_add_pd(s0, widen_lo(aa));
    s1 = _mm256_add_pd(s1, widen_hi(aa));
  }
  const __m256d s = _mm256_add_pd(_mm256_add_pd(s0, s1), _mm256_add_pd(s2, s3));
  __m128d h = _mm_add_pd(_mm256_castpd256_pd128(s), _mm256_extractf128_pd(s, 1));
  h = _mm_add_sd(h, _mm_unpackhi_pd(h, h));
  const double sum = _mm_cvtsd_f64(h);
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  const float scale = 1.0f / _mm_cvtss_f32(_mm_sqrt_ss(_mm_set_ss(mean + eps)));
  const __m256 vs = _mm256_set1_ps(scale);
  for (i = 0; i + 8 <= n; i += 8) {
    __m256 o = _mm256_mul_ps(_mm256_loadu_ps(x + i), vs);
    if (w != nullptr) o = _mm256_mul_ps(o, _mm256_loadu_ps(w + i));
    _mm256_storeu_ps(out + i, o);
  }
  if (i < n) {
    __m256 o = _mm256_mul_ps(Tail(x + i, n - i).load(), vs);
    if (w != nullptr) o = _mm256_mul_ps(o, Tail(w + i, n - i).load());
    store_tail(out + i, o, n - i);
  }
}

inline __m256 swiglu8(__m256 g, __m256 b) {
  const __m256 e = exp_ps(_mm256_sub_ps(_mm256_setzero_ps(), g));
  return _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), b);
}

void swiglu(float* a, const float* b, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(a + i, swiglu8(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
  if (i < n) store_tail(a + i, swiglu8(Tail(a + i, n - i).load(), Tail(b + i, n - i).load()), n - i);
}

// The table lookup of geglu_scalar in vectors (see elementwise_avx512.cpp).
inline __m256 geglu8(const uint16_t* table, __m256 x, __m256 b) {
  const __m128i h = _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256i words = _mm256_i32gather_epi32(reinterpret_cast<const int*>(table), _mm256_cvtepu16_epi32(h), 2);
  words = _mm256_and_si256(words, _mm256_set1_epi32(0xffff));
  const __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(words), _mm256_extracti128_si256(words, 1));
  __m256 g = _mm256_cvtph_ps(packed);
  g = _mm256_blendv_ps(g, x, _mm256_cmp_ps(x, _mm256_set1_ps(10.0f), _CMP_GE_OQ));
  g = _mm256_blendv_ps(g, _mm256_setzero_ps(), _mm256_cmp_ps(x, _mm256_set1_ps(-10.0f), _CMP_LE_OQ));
  return _mm256_mul_ps(g, b);
}

void geglu(float* a, const float* b, int64_t n) {
  const uint16_t* table = gelu_fp16_table_data();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(a + i, geglu8(table, _mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
  if (i < n) store_tail(a + i, geglu8(table, Tail(a + i, n - i).load(), Tail(b + i, n - i).load()), n - i);
}

// Max and scaling in vectors; exp is libm's expf bit for bit (attention_expf.h).
void softmax(float* x, int64_t n) {
  __m256 mv = _mm256_set1_ps(-INFINITY);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) mv = _mm256_max_ps(_mm256_loadu_ps(x + i), mv);
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mv), _mm256_extractf128_ps(mv, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
  float mx = _mm_cvtss_f32(m4);
  for (; i < n; ++i) mx = mx < x[i] ? x[i] : mx;
  const double sum = attn::exp_shifted_sum(x, n, mx);
  const float inv = static_cast<float>(1.0 / sum);
  const __m256 vi = _mm256_set1_ps(inv);
  for (i = 0; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), vi));
  for (; i < n; ++i) x[i] *= inv;
}

void add(float* a, const float* b, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(a + i, _mm256_add_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
  for (; i < n; ++i) a[i] += b[i];
}

void scale(float* a, float s, int64_t n) {
  const __m256 vs = _mm256_set1_ps(s);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(a + i, _mm256_mul_ps(_mm256_loadu_ps(a + i), vs));
  for (; i < n; ++i) a[i] *= s;
}

void exp(float* x, int64_t n) { attn::exp_shifted_sum(x, n, 0.0f); }

}  // namespace

void register_elementwise_avx2(ElementwiseKernels& k) {
  k.rms_norm = rms_norm;
  k.swiglu = swiglu;
  k.geglu = geglu;
  k.softmax = softmax;
  k.add = add;
  k.scale = scale;
  k.exp = exp;
}

}  // namespace pagoda::simd

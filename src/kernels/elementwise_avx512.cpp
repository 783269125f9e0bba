// avx512 bodies of the elementwise kernels (elementwise.h says what may differ from the
// scalar bodies). Compiled for avx512 only and called only when the CPU has it.
// Everything here has internal linkage and calls no inline function of a shared header.
#include "kernels/simd_intrinsics.h"
#include <math.h>

#include <cstdint>

#include "kernels/attention_expf.h"
#include "kernels/elementwise.h"

namespace pagoda::simd {
namespace {

inline __mmask16 first(int64_t r) { return r >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << r) - 1u); }

// e^x = 2^k e^r with k = round(x / ln 2) and r = x - k ln 2 (ln 2 split in two so k ln2_hi
// is exact), |r| <= ln(2) / 2; e^r by its Taylor series to degree 7 (truncation below 0.1
// ulp); vscalefps applies 2^k with IEEE overflow to inf and gradual underflow to 0.
// Within 1 ulp of glibc's expf wherever the result is a normal float (checked over every
// float input in [-87, 88]: 99.5% identical); NaN stays NaN.
inline __m512 exp_ps(__m512 x) {
  x = _mm512_max_ps(_mm512_set1_ps(-104.0f), _mm512_min_ps(_mm512_set1_ps(89.0f), x));
  const __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(k, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.0f / 5040.0f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, k);
}

void rms_norm(const float* x, const float* w, int64_t n, float eps, float* out) {
  // Squares in float, summed in double (four vectors of partial sums).
  __m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd(), s2 = _mm512_setzero_pd(), s3 = _mm512_setzero_pd();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 a = _mm512_loadu_ps(x + i), b = _mm512_loadu_ps(x + i + 16);
    const __m512 aa = _mm512_mul_ps(a, a), bb = _mm512_mul_ps(b, b);
    s0 = _mm512_add_pd(s0, _mm512_cvtps_pd(_mm512_castps512_ps256(aa)));
    s1 = _mm512_add_pd(s1, _mm512_cvtps_pd(_mm512_extractf32x8_ps(aa, 1)));
    s2 = _mm512_add_pd(s2, _mm512_cvtps_pd(_mm512_castps512_ps256(bb)));
    s3 = _mm512_add_pd(s3, _mm512_cvtps_pd(_mm512_extractf32x8_ps(bb, 1)));
  }
  for (; i < n; i += 16) {
    const __m512 a = _mm512_maskz_loadu_ps(first(n - i), x + i);
    const __m512 aa = _mm512_mul_ps(a, a);
    s0 = _mm512_add_pd(s0, _mm512_cvtps_pd(_mm512_castps512_ps256(aa)));
    s1 = _mm512_add_pd(s1, _mm512_cvtps_pd(_mm512_extractf32x8_ps(aa, 1)));
  }
  const double sum = _mm512_reduce_add_pd(_mm512_add_pd(_mm512_add_pd(s0, s1), _mm512_add_pd(s2, s3)));
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  const float scale = 1.0f / _mm_cvtss_f32(_mm_sqrt_ss(_mm_set_ss(mean + eps)));
  const __m512 vs = _mm512_set1_ps(scale);
  for (i = 0; i < n; i += 16) {
    const __mmask16 m = first(n - i);
    __m512 o = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), vs);
    if (w != nullptr) o = _mm512_mul_ps(o, _mm512_maskz_loadu_ps(m, w + i));
    _mm512_mask_storeu_ps(out + i, m, o);
  }
}

void swiglu(float* a, const float* b, int64_t n) {
  const __m512 one = _mm512_set1_ps(1.0f);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = first(n - i);
    const __m512 g = _mm512_maskz_loadu_ps(m, a + i);
    const __m512 e = exp_ps(_mm512_sub_ps(_mm512_setzero_ps(), g));
    const __m512 s = _mm512_div_ps(g, _mm512_add_ps(one, e));
    _mm512_mask_storeu_ps(a + i, m, _mm512_mul_ps(s, _mm512_maskz_loadu_ps(m, b + i)));
  }
}

// The table lookup of geglu_scalar in vectors: vcvtps2ph rounds like fp32_to_fp16, a
// gather of 32-bit words at 2-byte steps fetches the entries (the low half is the one).
void geglu(float* a, const float* b, int64_t n) {
  const uint16_t* table = gelu_fp16_table_data();
  const __m512 lo = _mm512_set1_ps(-10.0f), hi = _mm512_set1_ps(10.0f);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = first(n - i);
    const __m512 x = _mm512_maskz_loadu_ps(m, a + i);
    const __m256i h = _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512i words = _mm512_i32gather_epi32(_mm512_cvtepu16_epi32(h), table, 2);
    __m512 g = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(words));
    g = _mm512_mask_mov_ps(g, _mm512_cmp_ps_mask(x, hi, _CMP_GE_OQ), x);
    g = _mm512_mask_mov_ps(g, _mm512_cmp_ps_mask(x, lo, _CMP_LE_OQ), _mm512_setzero_ps());
    _mm512_mask_storeu_ps(a + i, m, _mm512_mul_ps(g, _mm512_maskz_loadu_ps(m, b + i)));
  }
}

// Max and scaling in vectors; exp is libm's expf bit for bit (attention_expf.h).
void softmax(float* x, int64_t n) {
  __m512 mv = _mm512_set1_ps(-INFINITY);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) mv = _mm512_max_ps(_mm512_loadu_ps(x + i), mv);
  float mx = _mm512_reduce_max_ps(mv);
  for (; i < n; ++i) mx = mx < x[i] ? x[i] : mx;
  const double sum = attn::exp_shifted_sum(x, n, mx);
  const __m512 inv = _mm512_set1_ps(static_cast<float>(1.0 / sum));
  for (i = 0; i < n; i += 16) {
    const __mmask16 m = first(n - i);
    _mm512_mask_storeu_ps(x + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), inv));
  }
}

void add(float* a, const float* b, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = first(n - i);
    _mm512_mask_storeu_ps(a + i, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i)));
  }
}

void scale(float* a, float s, int64_t n) {
  const __m512 vs = _mm512_set1_ps(s);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = first(n - i);
    _mm512_mask_storeu_ps(a + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, a + i), vs));
  }
}

void exp(float* x, int64_t n) { attn::exp_shifted_sum(x, n, 0.0f); }

}  // namespace

void register_elementwise_avx512(ElementwiseKernels& k) {
  k.rms_norm = rms_norm;
  k.swiglu = swiglu;
  k.geglu = geglu;
  k.softmax = softmax;
  k.add = add;
  k.scale = scale;
  k.exp = exp;
}

}  // namespace pagoda::simd

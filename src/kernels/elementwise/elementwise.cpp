// Front of the elementwise kernels and their scalar bodies (the reference the SIMD bodies
// are tested against).
#include "kernels/elementwise/elementwise.h"

#include <algorithm>
#include <cmath>

#include "base/fp16.h"

namespace pagoda {

namespace simd {
// Defined in elementwise_avx2.cpp / elementwise_avx512.cpp: fill the members they have.
void register_elementwise_avx2(ElementwiseKernels& k);
void register_elementwise_avx512(ElementwiseKernels& k);
}  // namespace simd

namespace {

void rms_norm_scalar(const float* x, const float* w, int64_t n, float eps, float* out) {
  double sum = 0.0;
  // Squares in float, summed in double: ggml's order, so norms match llama.cpp's bits.
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  const float scale = 1.0f / std::sqrt(mean + eps);
  if (w != nullptr) {
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] * scale * w[i];
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] * scale;
  }
}

void layer_norm_scalar(const float* x, const float* w, const float* b, int64_t n, float eps, float* out) {
  // ggml's norm: the mean and the variance from double sums, the rest in float.
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]);
  const float mean = static_cast<float>(sum) / static_cast<float>(n);
  double sq = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const float d = x[i] - mean;
    sq += static_cast<double>(d * d);
  }
  const float variance = static_cast<float>(sq / static_cast<double>(n));
  const float scale = 1.0f / std::sqrt(variance + eps);
  for (int64_t i = 0; i < n; ++i) {
    float y = (x[i] - mean) * scale;
    if (w != nullptr) y *= w[i];
    if (b != nullptr) y += b[i];
    out[i] = y;
  }
}

void swiglu_scalar(float* a, const float* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = a[i];
    a[i] = g / (1.0f + std::exp(-g)) * b[i];
  }
}

// GELU of every FP16 input, stored as FP16. ggml evaluates GELU this way (input rounded
// to FP16, result looked up), and Gemma's logits move measurably if we do otherwise, so
// we follow it: parity with llama.cpp is how we prove correctness. It is also cheaper
// than tanh per element.
struct GeluTable {
  uint16_t v[65536 + 2];
  GeluTable() {
    for (uint32_t h = 0; h < 65536; ++h) v[h] = fp32_to_fp16(gelu_tanh(fp16_to_fp32(static_cast<uint16_t>(h))));
    v[65536] = v[65537] = 0;
  }
};

const GeluTable& gelu_table() {
  static const GeluTable table;
  return table;
}

float gelu_of(const GeluTable& t, float x) {
  if (x <= -10.0f) return 0.0f;
  if (x >= 10.0f) return x;
  return fp16_to_fp32(t.v[fp32_to_fp16(x)]);
}

void geglu_scalar(float* a, const float* b, int64_t n) {
  const GeluTable& t = gelu_table();
  for (int64_t i = 0; i < n; ++i) a[i] = gelu_of(t, a[i]) * b[i];
}

void gelu_scalar(float* a, int64_t n) {
  const GeluTable& t = gelu_table();
  for (int64_t i = 0; i < n; ++i) a[i] = gelu_of(t, a[i]);
}

void softmax_scalar(float* x, int64_t n) {
  float mx = -INFINITY;
  for (int64_t i = 0; i < n; ++i) mx = std::max(mx, x[i]);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - mx);
    sum += x[i];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

double log_sum_exp_scalar(const float* x, int64_t n, int32_t* argmax) {
  float mx = -INFINITY;
  int64_t at = 0;
  bool nan = false;
  for (int64_t i = 0; i < n; ++i) {
    if (x[i] > mx) {
      mx = x[i];
      at = i;
    }
    nan |= std::isnan(x[i]);
  }
  if (argmax) *argmax = static_cast<int32_t>(at);
  if (nan) return NAN;
  if (!(mx > -INFINITY)) return -INFINITY;
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(x[i]) - mx);
  return static_cast<double>(mx) + std::log(sum);
}

void add_scalar(float* a, const float* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) a[i] += b[i];
}

void scale_scalar(float* a, float s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) a[i] *= s;
}

void exp_scalar(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = std::exp(x[i]);
}

void softcap_scalar(float* x, float cap, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = softcap(x[i], cap);
}

const ElementwiseKernels& best() {
  static const ElementwiseKernels k = elementwise_kernels(best_simd_target());
  return k;
}

}  // namespace

ElementwiseKernels elementwise_kernels(SimdTarget target) {
  ElementwiseKernels k;
  k.rms_norm = rms_norm_scalar;
  k.layer_norm = layer_norm_scalar;
  k.swiglu = swiglu_scalar;
  k.geglu = geglu_scalar;
  k.gelu = gelu_scalar;
  k.softmax = softmax_scalar;
  k.log_sum_exp = log_sum_exp_scalar;
  k.add = add_scalar;
  k.scale = scale_scalar;
  k.exp = exp_scalar;
  k.softcap = softcap_scalar;
  if (target >= SimdTarget::kAvx2) simd::register_elementwise_avx2(k);
  if (target >= SimdTarget::kAvx512) simd::register_elementwise_avx512(k);
  return k;
}

const uint16_t* gelu_fp16_table_data() { return gelu_table().v; }

float gelu_tanh(float x) {
  constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;
  constexpr float kCoef = 0.044715f;
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + kCoef * x * x)));
}

float softcap(float x, float cap) {
  const float y = x * (1.0f / cap);
  return static_cast<float>(std::tanh(static_cast<double>(y))) * cap;
}

float gelu_fp16_table(float x) { return gelu_of(gelu_table(), x); }

void rms_norm(const float* x, const float* w, int64_t n, float eps, float* out) { best().rms_norm(x, w, n, eps, out); }
void layer_norm(const float* x, const float* w, const float* b, int64_t n, float eps, float* out) {
  best().layer_norm(x, w, b, n, eps, out);
}
void swiglu(float* a, const float* b, int64_t n) { best().swiglu(a, b, n); }
void geglu(float* a, const float* b, int64_t n) { best().geglu(a, b, n); }
void gelu_inplace(float* a, int64_t n) { best().gelu(a, n); }
void softmax(float* x, int64_t n) { best().softmax(x, n); }
double log_sum_exp_row(const float* x, int64_t n, int32_t* argmax) { return best().log_sum_exp(x, n, argmax); }
void add_inplace(float* a, const float* b, int64_t n) { best().add(a, b, n); }
void scale_inplace(float* a, float s, int64_t n) { best().scale(a, s, n); }
void exp_inplace(float* x, int64_t n) { best().exp(x, n); }
void softcap_inplace(float* x, float cap, int64_t n) { best().softcap(x, cap, n); }

}  // namespace pagoda

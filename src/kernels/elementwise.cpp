#include "kernels/elementwise.h"

#include <algorithm>
#include <cmath>

namespace pagoda {

void rms_norm(const float* x, const float* w, int64_t n, float eps, float* out) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  const float scale = 1.0f / std::sqrt(mean + eps);
  if (w != nullptr) {
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] * scale * w[i];
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] * scale;
  }
}

void swiglu(float* a, const float* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = a[i];
    a[i] = g / (1.0f + std::exp(-g)) * b[i];
  }
}

float gelu_tanh(float x) {
  constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;
  constexpr float kCoef = 0.044715f;
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + kCoef * x * x)));
}

void geglu(float* a, const float* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) a[i] = gelu_tanh(a[i]) * b[i];
}

void softmax(float* x, int64_t n) {
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

void add_inplace(float* a, const float* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) a[i] += b[i];
}

void scale_inplace(float* a, float s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) a[i] *= s;
}

}  // namespace pagoda

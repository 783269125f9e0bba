#include "quant/scalar_math.h"

#include <cmath>
#include <cstring>

#include "quant/w8a8.h"

namespace pagoda {
namespace {

// max |x| ignoring NaN (a NaN never compares greater), in any order: the SIMD bodies
// reduce in another order and must find the same value.
float absmax(const float* x, int64_t n) {
  float amax = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    const float a = std::fabs(x[i]);
    amax = a > amax ? a : amax;
  }
  return amax;
}

inline int clamp127(int v) { return v < -127 ? -127 : (v > 127 ? 127 : v); }

}  // namespace

float quantize_row_w8a8(const float* src, int8_t* dst, int64_t n) {
  const float amax = absmax(src, n);
  const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
  for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<int8_t>(clamp127(quant::nearest_int(src[i] * id)));
  return amax / 127.0f;
}

void dequantize_row_w8a8(const int8_t* q, float scale, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = scale * static_cast<float>(q[i]);
}

size_t w8a8_act_stride(int64_t n) { return (static_cast<size_t>(n) + 63) / 64 * 64; }

float quantize_activation_w8a8(const float* src, int64_t n, int8_t* q, int32_t* sum) {
  const float amax = absmax(src, n);
  const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
  int32_t s = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int v = clamp127(quant::nearest_int(src[i] * id));
    q[i] = static_cast<int8_t>(v);
    s += v;
  }
  std::memset(q + n, 0, w8a8_act_stride(n) - static_cast<size_t>(n));
  *sum = s;
  return amax / 127.0f;
}

int32_t dot_w8a8_int(const int8_t* w, const int8_t* x, int64_t n) {
  int64_t s = 0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<int32_t>(w[i]) * x[i];
  return static_cast<int32_t>(s);
}

}  // namespace pagoda

// Dots of K-quant weight rows with Q8_K activation rows. As in llama.cpp's generic
// kernels, each super-block is summed exactly in int32 (levels x activation quants x
// group scales), then scaled once by d_w * d_x; the "- min" part of Q2_K/Q4_K/Q5_K uses
// the activation group sums (bsums) instead of another pass over the values. Bounds: the
// largest per-block sum (Q5_K: 63 * 31 * 127 * 256) is far below 2^31.
#include "quant/scalar_math.h"

#include "quant/k_unpack.h"
#include "quant/rows.h"

namespace pagoda::quant {
namespace {

// sum over groups g of scale[g] * <q, x> restricted to group g (groups of kGroup values).
template <int kGroup, typename Scale>
inline int32_t grouped_dot(const int8_t* q, const int8_t* x, const Scale* scale) {
  int32_t total = 0;
  for (int g = 0; g < kQK_K / kGroup; ++g) {
    int32_t s = 0;
    for (int l = 0; l < kGroup; ++l) s += q[kGroup * g + l] * x[kGroup * g + l];
    total += static_cast<int32_t>(scale[g]) * s;
  }
  return total;
}

}  // namespace

float vec_dot_q2_K_q8_K(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const BlockQ2_K*>(w);
  const auto* b = static_cast<const BlockQ8_K*>(x);
  int8_t q[kQK_K];
  int sc[16];
  int mn[16];
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    unpack_q2_K(a[i], q);
    int32_t summs = 0;
    for (int g = 0; g < 16; ++g) {
      sc[g] = a[i].scales[g] & 0x0f;
      mn[g] = a[i].scales[g] >> 4;
      summs += b[i].bsums[g] * mn[g];
    }
    const int32_t isum = grouped_dot<16>(q, b[i].qs, sc);
    const float dall = b[i].d * fp16_to_fp32(a[i].d);
    const float dmin = b[i].d * fp16_to_fp32(a[i].dmin);
    sum += dall * static_cast<float>(isum) - dmin * static_cast<float>(summs);
  }
  return sum;
}

float vec_dot_q3_K_q8_K(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const BlockQ3_K*>(w);
  const auto* b = static_cast<const BlockQ8_K*>(x);
  int8_t q[kQK_K];
  int sc[16];
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    unpack_q3_K(a[i], q);
    unpack_q3_K_scales(a[i].scales, sc);
    const int32_t isum = grouped_dot<16>(q, b[i].qs, sc);
    sum += fp16_to_fp32(a[i].d) * b[i].d * static_cast<float>(isum);
  }
  return sum;
}

namespace {

template <typename Block>
inline float dot_k4_style(const Block& a, const BlockQ8_K& b, const int8_t* q) {
  uint8_t sc[8];
  uint8_t mn[8];
  for (int g = 0; g < 8; ++g) unpack_k4_scale_min(g, a.scales, &sc[g], &mn[g]);
  int32_t summs = 0;
  for (int j = 0; j < 16; ++j) summs += b.bsums[j] * mn[j / 2];
  const int32_t isum = grouped_dot<32>(q, b.qs, sc);
  const float d = fp16_to_fp32(a.d) * b.d;
  const float dmin = fp16_to_fp32(a.dmin) * b.d;
  return d * static_cast<float>(isum) - dmin * static_cast<float>(summs);
}

}  // namespace

float vec_dot_q4_K_q8_K(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const BlockQ4_K*>(w);
  const auto* b = static_cast<const BlockQ8_K*>(x);
  int8_t q[kQK_K];
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    unpack_q4_K(a[i], q);
    sum += dot_k4_style(a[i], b[i], q);
  }
  return sum;
}

float vec_dot_q5_K_q8_K(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const BlockQ5_K*>(w);
  const auto* b = static_cast<const BlockQ8_K*>(x);
  int8_t q[kQK_K];
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    unpack_q5_K(a[i], q);
    sum += dot_k4_style(a[i], b[i], q);
  }
  return sum;
}

float vec_dot_q6_K_q8_K(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const BlockQ6_K*>(w);
  const auto* b = static_cast<const BlockQ8_K*>(x);
  int8_t q[kQK_K];
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    unpack_q6_K(a[i], q);
    const int32_t isum = grouped_dot<16>(q, b[i].qs, a[i].scales);
    sum += fp16_to_fp32(a[i].d) * b[i].d * static_cast<float>(isum);
  }
  return sum;
}

float vec_dot_q8_K_q8_K(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const BlockQ8_K*>(w);
  const auto* b = static_cast<const BlockQ8_K*>(x);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int32_t isum = 0;
    for (int j = 0; j < kQK_K; ++j) isum += a[i].qs[j] * b[i].qs[j];
    sum += a[i].d * b[i].d * static_cast<float>(isum);
  }
  return sum;
}

}  // namespace pagoda::quant

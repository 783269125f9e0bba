// Dequantization of the K-quants and Q8_K. Each value is computed with the same float
// operations in the same order as gguf-py's numpy code (scale products first, then
// level * scale, then the min), which makes the output bit-identical to it.
#include "quant/scalar_math.h"

#include "quant/k_unpack.h"
#include "quant/rows.h"

namespace pagoda::quant {

void dequantize_row_q2_K(const void* __restrict src, float* __restrict dst, int64_t n) {
  const auto* b = static_cast<const BlockQ2_K*>(src);
  int8_t q[kQK_K];
  for (int64_t i = 0; i < n / kQK_K; ++i, dst += kQK_K) {
    const float d = fp16_to_fp32(b[i].d);
    const float dmin = fp16_to_fp32(b[i].dmin);
    unpack_q2_K(b[i], q);
    for (int g = 0; g < 16; ++g) {
      const float dl = d * static_cast<float>(b[i].scales[g] & 0x0f);
      const float ml = dmin * static_cast<float>(b[i].scales[g] >> 4);
      for (int l = 0; l < 16; ++l) dst[16 * g + l] = dl * static_cast<float>(q[16 * g + l]) - ml;
    }
  }
}

void dequantize_row_q3_K(const void* __restrict src, float* __restrict dst, int64_t n) {
  const auto* b = static_cast<const BlockQ3_K*>(src);
  int8_t q[kQK_K];
  int scales[16];
  for (int64_t i = 0; i < n / kQK_K; ++i, dst += kQK_K) {
    const float d = fp16_to_fp32(b[i].d);
    unpack_q3_K(b[i], q);
    unpack_q3_K_scales(b[i].scales, scales);
    for (int g = 0; g < 16; ++g) {
      const float dl = d * static_cast<float>(scales[g]);
      for (int l = 0; l < 16; ++l) dst[16 * g + l] = dl * static_cast<float>(q[16 * g + l]);
    }
  }
}

namespace {

// Q4_K and Q5_K differ only in how many bits the levels have.
template <typename Block>
void dequantize_k4_style(const Block& b, const int8_t* q, float* dst) {
  const float d = fp16_to_fp32(b.d);
  const float dmin = fp16_to_fp32(b.dmin);
  for (int g = 0; g < 8; ++g) {
    uint8_t sc, m;
    unpack_k4_scale_min(g, b.scales, &sc, &m);
    const float dl = d * static_cast<float>(sc);
    const float ml = dmin * static_cast<float>(m);
    for (int l = 0; l < 32; ++l) dst[32 * g + l] = dl * static_cast<float>(q[32 * g + l]) - ml;
  }
}

}  // namespace

void dequantize_row_q4_K(const void* __restrict src, float* __restrict dst, int64_t n) {
  const auto* b = static_cast<const BlockQ4_K*>(src);
  int8_t q[kQK_K];
  for (int64_t i = 0; i < n / kQK_K; ++i, dst += kQK_K) {
    unpack_q4_K(b[i], q);
    dequantize_k4_style(b[i], q, dst);
  }
}

void dequantize_row_q5_K(const void* __restrict src, float* __restrict dst, int64_t n) {
  const auto* b = static_cast<const BlockQ5_K*>(src);
  int8_t q[kQK_K];
  for (int64_t i = 0; i < n / kQK_K; ++i, dst += kQK_K) {
    unpack_q5_K(b[i], q);
    dequantize_k4_style(b[i], q, dst);
  }
}

void dequantize_row_q6_K(const void* __restrict src, float* __restrict dst, int64_t n) {
  const auto* b = static_cast<const BlockQ6_K*>(src);
  int8_t q[kQK_K];
  for (int64_t i = 0; i < n / kQK_K; ++i, dst += kQK_K) {
    const float d = fp16_to_fp32(b[i].d);
    unpack_q6_K(b[i], q);
    for (int g = 0; g < 16; ++g) {
      const float dl = d * static_cast<float>(b[i].scales[g]);
      for (int l = 0; l < 16; ++l) dst[16 * g + l] = dl * static_cast<float>(q[16 * g + l]);
    }
  }
}

void dequantize_row_q8_K(const void* __restrict src, float* __restrict dst, int64_t n) {
  const auto* b = static_cast<const BlockQ8_K*>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i, dst += kQK_K) {
    for (int j = 0; j < kQK_K; ++j) dst[j] = b[i].d * static_cast<float>(b[i].qs[j]);
  }
}

}  // namespace pagoda::quant

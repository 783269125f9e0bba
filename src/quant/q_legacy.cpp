// The 32-value formats Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0. Quantizers reproduce gguf-py's
// numpy code operation for operation (which itself mirrors llama.cpp's
// quantize_row_*_ref), so both tools emit the same bytes. Dots pair each with Q8_0
// activations and accumulate each block in integers before one float scaling, as
// llama.cpp's generic vec_dot does.
#include "quant/scalar_math.h"

#include <cmath>
#include <cstring>

#include "quant/blocks.h"
#include "quant/level_pack.h"
#include "quant/rows.h"

namespace pagoda::quant {
namespace {

// Value with the largest magnitude, the first one on ties (numpy's argmax), sign kept:
// the symmetric formats put it on the most negative level (-8 or -16) so it is exact.
inline float signed_absmax(const float* x) {
  float amax = std::fabs(x[0]);
  float max = x[0];
  for (int j = 1; j < kQK; ++j) {
    const float a = std::fabs(x[j]);
    if (a > amax) {
      amax = a;
      max = x[j];
    }
  }
  return max;
}

inline uint32_t load_qh(const uint8_t* qh) {
  uint32_t v;
  std::memcpy(&v, qh, 4);
  return v;
}


// Symmetric 4/5-bit: d = max / -(2^(bits-1)), q = trunc(x / d + offset + 0.5).
template <int kLevels>
inline float symmetric_levels(const float* x, int* q) {
  constexpr int kHalf = kLevels / 2;
  const float d = signed_absmax(x) / static_cast<float>(-kHalf);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  for (int j = 0; j < kQK; ++j) q[j] = trunc_clamped(x[j] * id + (kHalf + 0.5f), kLevels - 1);
  return d;
}

// Affine 4/5-bit: d = (max - min) / (levels - 1), q = trunc((x - min) / d + 0.5).
template <int kLevels>
inline void affine_levels(const float* x, int* q, float* d_out, float* min_out) {
  float min = x[0];
  float max = x[0];
  for (int j = 1; j < kQK; ++j) {
    min = x[j] < min ? x[j] : min;
    max = x[j] > max ? x[j] : max;
  }
  const float d = (max - min) / static_cast<float>(kLevels - 1);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  for (int j = 0; j < kQK; ++j) q[j] = trunc_clamped((x[j] - min) * id + 0.5f, kLevels - 1);
  *d_out = d;
  *min_out = min;
}


}  // namespace

// ---------------------------------------------------------------- dequantize

void dequantize_row_q4_0(const void* __restrict src, float* __restrict dst, int64_t n) {
  const auto* b = static_cast<const BlockQ4_0*>(src);
  for (int64_t i = 0; i < n / kQK; ++i, dst += kQK) {
    const float d = fp16_to_fp32(b[i].d);
    for (int j = 0; j < kQK / 2; ++j) {
      dst[j] = d * static_cast<float>((b[i].qs[j] & 0x0f) - 8);
      dst[j + kQK / 2] = d * static_cast<float>((b[i].qs[j] >> 4) - 8);
    }
  }
}

void dequantize_row_q4_1(const void* __restrict src, float* __restrict dst, int64_t n) {
  const auto* b = static_cast<const BlockQ4_1*>(src);
  for (int64_t i = 0; i < n / kQK; ++i, dst += kQK) {
    const float d = fp16_to_fp32(b[i].d);
    const float m = fp16_to_fp32(b[i].m);
    for (int j = 0; j < kQK / 2; ++j) {
      dst[j] = d * static_cast<float>(b[i].qs[j] & 0x0f) + m;
      dst[j + kQK / 2] = d * static_cast<float>(b[i].qs[j] >> 4) + m;
    }
  }
}

void dequantize_row_q5_0(const void* __restrict src, float* __restrict dst, int64_t n) {
  const auto* b = static_cast<const BlockQ5_0*>(src);
  for (int64_t i = 0; i < n / kQK; ++i, dst += kQK) {
    const float d = fp16_to_fp32(b[i].d);
    const uint32_t qh = load_qh(b[i].qh);
    for (int j = 0; j < kQK / 2; ++j) {
      const int lo = (b[i].qs[j] & 0x0f) | static_cast<int>(((qh >> j) & 1) << 4);
      const int hi = (b[i].qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1) << 4);
      dst[j] = d * static_cast<float>(lo - 16);
      dst[j + kQK / 2] = d * static_cast<float>(hi - 16);
    }
  }
}

void dequantize_row_q5_1(const void* __restrict src, float* __restrict dst, int64_t n) {
  const auto* b = static_cast<const BlockQ5_1*>(src);
  for (int64_t i = 0; i < n / kQK; ++i, dst += kQK) {
    const float d = fp16_to_fp32(b[i].d);
    const float m = fp16_to_fp32(b[i].m);
    const uint32_t qh = load_qh(b[i].qh);
    for (int j = 0; j < kQK / 2; ++j) {
      const int lo = (b[i].qs[j] & 0x0f) | static_cast<int>(((qh >> j) & 1) << 4);
      const int hi = (b[i].qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1) << 4);
      dst[j] = d * static_cast<float>(lo) + m;
      dst[j + kQK / 2] = d * static_cast<float>(hi) + m;
    }
  }
}

void dequantize_row_q8_0(const void* __restrict src, float* __restrict dst, int64_t n) {
  const auto* b = static_cast<const BlockQ8_0*>(src);
  for (int64_t i = 0; i < n / kQK; ++i, dst += kQK) {
    const float d = fp16_to_fp32(b[i].d);
    for (int j = 0; j < kQK; ++j) dst[j] = static_cast<float>(b[i].qs[j]) * d;
  }
}

// ---------------------------------------------------------------- quantize

void quantize_row_q4_0(const float* __restrict src, void* __restrict dst, int64_t n) {
  auto* b = static_cast<BlockQ4_0*>(dst);
  int q[kQK];
  for (int64_t i = 0; i < n / kQK; ++i, src += kQK) {
    b[i].d = fp32_to_fp16(symmetric_levels<16>(src, q));
    pack_nibbles(q, b[i].qs);
  }
}

void quantize_row_q4_1(const float* __restrict src, void* __restrict dst, int64_t n) {
  auto* b = static_cast<BlockQ4_1*>(dst);
  int q[kQK];
  for (int64_t i = 0; i < n / kQK; ++i, src += kQK) {
    float d, min;
    affine_levels<16>(src, q, &d, &min);
    b[i].d = fp32_to_fp16(d);
    b[i].m = fp32_to_fp16(min);
    pack_nibbles(q, b[i].qs);
  }
}

void quantize_row_q5_0(const float* __restrict src, void* __restrict dst, int64_t n) {
  auto* b = static_cast<BlockQ5_0*>(dst);
  int q[kQK];
  for (int64_t i = 0; i < n / kQK; ++i, src += kQK) {
    b[i].d = fp32_to_fp16(symmetric_levels<32>(src, q));
    pack_fifth_bits(q, b[i].qh);
    pack_nibbles(q, b[i].qs);
  }
}

void quantize_row_q5_1(const float* __restrict src, void* __restrict dst, int64_t n) {
  auto* b = static_cast<BlockQ5_1*>(dst);
  int q[kQK];
  for (int64_t i = 0; i < n / kQK; ++i, src += kQK) {
    float d, min;
    affine_levels<32>(src, q, &d, &min);
    b[i].d = fp32_to_fp16(d);
    b[i].m = fp32_to_fp16(min);
    pack_fifth_bits(q, b[i].qh);
    pack_nibbles(q, b[i].qs);
  }
}

void quantize_row_q8_0(const float* __restrict src, void* __restrict dst, int64_t n) {
  auto* b = static_cast<BlockQ8_0*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, src += kQK) {
    float amax = 0.0f;
    for (int j = 0; j < kQK; ++j) {
      const float a = std::fabs(src[j]);
      amax = a > amax ? a : amax;
    }
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = fp32_to_fp16(d);
    for (int j = 0; j < kQK; ++j) b[i].qs[j] = static_cast<int8_t>(round_half_away(src[j] * id));
  }
}

// Activations: llama.cpp's x86 kernels quantize them with the scale's reciprocal taken as
// 127 / amax and ties rounded to even (SIMD rounding), not the reference's 1 / d with
// ties away from zero. Activations derived from quantized embeddings hit exact ties
// often, so this choice decides whether our logits match llama.cpp's bit for bit.
void quantize_row_q8_0_activation(const float* __restrict src, void* __restrict dst, int64_t n) {
  auto* b = static_cast<BlockQ8_0*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, src += kQK) {
    float amax = 0.0f;
    for (int j = 0; j < kQK; ++j) {
      const float a = std::fabs(src[j]);
      amax = a > amax ? a : amax;
    }
    b[i].d = fp32_to_fp16(amax / 127.0f);
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    for (int j = 0; j < kQK; ++j) b[i].qs[j] = static_cast<int8_t>(nearest_int(src[j] * id));
  }
}

// ---------------------------------------------------------------- dot with Q8_0

float vec_dot_q4_0_q8_0(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const BlockQ4_0*>(w);
  const auto* b = static_cast<const BlockQ8_0*>(x);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK; ++i) {
    int sumi = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      sumi += ((a[i].qs[j] & 0x0f) - 8) * b[i].qs[j];
      sumi += ((a[i].qs[j] >> 4) - 8) * b[i].qs[j + kQK / 2];
    }
    sum += static_cast<float>(sumi) * fp16_to_fp32(a[i].d) * fp16_to_fp32(b[i].d);
  }
  return sum;
}

// The min term needs the sum of the activation quants; llama.cpp precomputes it as the
// FP16 field s of Q8_1, we take it exactly from the Q8_0 quants.
float vec_dot_q4_1_q8_0(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const BlockQ4_1*>(w);
  const auto* b = static_cast<const BlockQ8_0*>(x);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK; ++i) {
    int sumi = 0;
    int sumx = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      sumi += (a[i].qs[j] & 0x0f) * b[i].qs[j];
      sumi += (a[i].qs[j] >> 4) * b[i].qs[j + kQK / 2];
      sumx += b[i].qs[j] + b[i].qs[j + kQK / 2];
    }
    const float dx = fp16_to_fp32(b[i].d);
    sum += fp16_to_fp32(a[i].d) * dx * static_cast<float>(sumi) +
           fp16_to_fp32(a[i].m) * (dx * static_cast<float>(sumx));
  }
  return sum;
}

float vec_dot_q5_0_q8_0(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const BlockQ5_0*>(w);
  const auto* b = static_cast<const BlockQ8_0*>(x);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK; ++i) {
    const uint32_t qh = load_qh(a[i].qh);
    int sumi = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      const int lo = ((a[i].qs[j] & 0x0f) | static_cast<int>(((qh >> j) & 1) << 4)) - 16;
      const int hi = ((a[i].qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1) << 4)) - 16;
      sumi += lo * b[i].qs[j] + hi * b[i].qs[j + kQK / 2];
    }
    sum += fp16_to_fp32(a[i].d) * fp16_to_fp32(b[i].d) * static_cast<float>(sumi);
  }
  return sum;
}

float vec_dot_q5_1_q8_0(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const BlockQ5_1*>(w);
  const auto* b = static_cast<const BlockQ8_0*>(x);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK; ++i) {
    const uint32_t qh = load_qh(a[i].qh);
    int sumi = 0;
    int sumx = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      const int lo = (a[i].qs[j] & 0x0f) | static_cast<int>(((qh >> j) & 1) << 4);
      const int hi = (a[i].qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1) << 4);
      sumi += lo * b[i].qs[j] + hi * b[i].qs[j + kQK / 2];
      sumx += b[i].qs[j] + b[i].qs[j + kQK / 2];
    }
    const float dx = fp16_to_fp32(b[i].d);
    sum += fp16_to_fp32(a[i].d) * dx * static_cast<float>(sumi) +
           fp16_to_fp32(a[i].m) * (dx * static_cast<float>(sumx));
  }
  return sum;
}

float vec_dot_q8_0_q8_0(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const BlockQ8_0*>(w);
  const auto* b = static_cast<const BlockQ8_0*>(x);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK; ++i) {
    int sumi = 0;
    for (int j = 0; j < kQK; ++j) sumi += a[i].qs[j] * b[i].qs[j];
    sum += static_cast<float>(sumi) * (fp16_to_fp32(a[i].d) * fp16_to_fp32(b[i].d));
  }
  return sum;
}

}  // namespace pagoda::quant

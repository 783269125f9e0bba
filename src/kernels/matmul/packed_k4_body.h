// Internal: what the packed Q4_K bodies (packed_k4_avx512.cpp, packed_k4_amx.cpp) share:
// reading a K4Layout block's scales, mins and FP16 d/dmin into lanes, and the Q8_K
// activation terms (scale, sub-block sum pairs). Include only from files compiled for
// AVX-512 (*_avx512.cpp, *_amx.cpp): internal linkage, one copy per including file.
#pragma once

#include "kernels/simd/avx512_common.h"
#include "kernels/matmul/packed_layout.h"
#include "quant/blocks.h"

namespace pagoda::simd {
namespace {

using L = packed::K4Layout;

constexpr size_t kXQs = offsetof(BlockQ8_K, qs);
constexpr size_t kXBsums = offsetof(BlockQ8_K, bsums);

inline __m512 halves(const uint8_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
inline __m512i scale_lanes(const uint8_t* blk, int j) {
  return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + L::kScalesAt + 16 * j)));
}
// The same as floats: the scaled sub-block dots are summed in FP32 by FMA, exact while
// the sum is under 2^24 (as the int32 sum converted once was), in the same order (j =
// 0..7) by every body, so the tiles equal the GEMV bit for bit.
inline __m512 scale_floats(const uint8_t* blk, int j) { return _mm512_cvtepi32_ps(scale_lanes(blk, j)); }
// For the high-nibble sub-blocks (odd j) dotted in place, as 16 * q (no shift): scale / 16
// makes each product the same exact value.
inline __m512 scale_floats_x16(const uint8_t* blk, int j) {
  return _mm512_mul_ps(scale_floats(blk, j), _mm512_set1_ps(1.0f / 16));
}
inline __m512i min_pairs(const uint8_t* blk, int i) {
  return _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + L::kMinsAt + 32 * i)));
}

// The activation sums of sub-blocks 2i and 2i+1 of one Q8_K block as one dword of two
// int16 (|sum| <= 32 * 128 fits), for i = 0..3.
inline void sum_pairs(const uint8_t* xblk, int32_t* out) {
  int16_t bs[16];
  std::memcpy(bs, xblk + kXBsums, sizeof(bs));
  for (int i = 0; i < 4; ++i) {
    const auto lo = static_cast<uint16_t>(bs[4 * i] + bs[4 * i + 1]);
    const auto hi = static_cast<uint16_t>(bs[4 * i + 2] + bs[4 * i + 3]);
    out[i] = static_cast<int32_t>(static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16));
  }
}

inline float x_scale(const uint8_t* xblk) {
  float d;
  std::memcpy(&d, xblk, sizeof(float));
  return d;
}

// Per token and super-block: the activation scale and the four sum pairs.
struct XSums {
  float d;
  int32_t pairs[4];
};
// Fills sums[b * stride + t] for tokens [0, tokens) of the Q8_K rows at x (stride xs).
inline void stage_sums(const uint8_t* x, size_t xs, int64_t tokens, int64_t nb, XSums* sums, int64_t stride) {
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* xblk = x + t * xs + b * sizeof(BlockQ8_K);
      XSums& s = sums[b * stride + t];
      s.d = x_scale(xblk);
      sum_pairs(xblk, s.pairs);
    }
}

}  // namespace
}  // namespace pagoda::simd

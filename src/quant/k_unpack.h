// Unpacking of K-quant super-blocks into one small integer per value plus per-group
// scales. Dequantize and the scalar dots both go through these, so the bit layouts of
// blocks.h are decoded in exactly one place; the SIMD kernels decode the same layouts in
// registers and are tested against code built on these.
#pragma once

#include <cstdint>

#include "quant/blocks.h"

namespace pagoda::quant {

// Q2_K levels 0..3: value 128h + 32k + l is bits 2k..2k+1 of qs[32h + l].
inline void unpack_q2_K(const BlockQ2_K& b, int8_t* q) {
  for (int h = 0; h < 2; ++h)
    for (int k = 0; k < 4; ++k)
      for (int l = 0; l < 32; ++l)
        q[128 * h + 32 * k + l] = static_cast<int8_t>((b.qs[32 * h + l] >> (2 * k)) & 3);
}

// Q3_K levels -4..3: Q2_K's low bits, minus 4 where the high bit (bit e/32 of
// hmask[e%32]) is clear.
inline void unpack_q3_K(const BlockQ3_K& b, int8_t* q) {
  for (int h = 0; h < 2; ++h)
    for (int k = 0; k < 4; ++k)
      for (int l = 0; l < 32; ++l)
        q[128 * h + 32 * k + l] = static_cast<int8_t>((b.qs[32 * h + l] >> (2 * k)) & 3);
  for (int e = 0; e < kQK_K; ++e)
    q[e] = static_cast<int8_t>(q[e] - (((b.hmask[e % 32] >> (e / 32)) & 1) ? 0 : 4));
}

// The 16 signed 6-bit group scales of Q3_K (already minus 32): low nibbles in bytes 0..7
// (groups 0..7 low half, 8..15 high half), top two bits of group g in byte 8 + g%4 at
// bit 2*(g/4).
inline void unpack_q3_K_scales(const uint8_t* s, int* out) {
  for (int g = 0; g < 16; ++g) {
    const int low = g < 8 ? (s[g] & 0x0f) : (s[g - 8] >> 4);
    const int high = (s[8 + g % 4] >> (2 * (g / 4))) & 3;
    out[g] = (low | (high << 4)) - 32;
  }
}

// The 8 six-bit scales and mins of Q4_K/Q5_K: groups 0..3 in the low 6 bits of bytes
// 0..3 (scales) and 4..7 (mins); groups 4..7 keep their low 4 bits in bytes 8..11 and
// their top 2 bits in the spare top bits of bytes 0..7.
inline void unpack_k4_scale_min(int g, const uint8_t* s, uint8_t* sc, uint8_t* m) {
  if (g < 4) {
    *sc = s[g] & 63;
    *m = s[g + 4] & 63;
  } else {
    *sc = static_cast<uint8_t>((s[g + 4] & 0x0f) | ((s[g - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((s[g + 4] >> 4) | ((s[g] >> 6) << 4));
  }
}

// Q4_K levels 0..15: group 2c+s is nibble s of qs[32c .. 32c+31].
inline void unpack_q4_K(const BlockQ4_K& b, int8_t* q) {
  for (int c = 0; c < 4; ++c)
    for (int l = 0; l < 32; ++l) {
      q[64 * c + l] = static_cast<int8_t>(b.qs[32 * c + l] & 0x0f);
      q[64 * c + 32 + l] = static_cast<int8_t>(b.qs[32 * c + l] >> 4);
    }
}

// Q5_K levels 0..31: Q4_K's nibbles plus bit g of qh[l] for value l of group g.
inline void unpack_q5_K(const BlockQ5_K& b, int8_t* q) {
  for (int c = 0; c < 4; ++c)
    for (int l = 0; l < 32; ++l) {
      q[64 * c + l] = static_cast<int8_t>((b.qs[32 * c + l] & 0x0f) | (((b.qh[l] >> (2 * c)) & 1) << 4));
      q[64 * c + 32 + l] =
          static_cast<int8_t>((b.qs[32 * c + l] >> 4) | (((b.qh[l] >> (2 * c + 1)) & 1) << 4));
    }
}

// Q6_K levels -32..31. Within each half h (128 values), value 32k + l takes its low
// nibble from ql[64h + 32(k&1) + l] (low nibble for k < 2, high for k >= 2) and its top two
// bits from bits 2k..2k+1 of qh[32h + l].
inline void unpack_q6_K(const BlockQ6_K& b, int8_t* q) {
  for (int h = 0; h < 2; ++h)
    for (int k = 0; k < 4; ++k)
      for (int l = 0; l < 32; ++l) {
        const int low = (b.ql[64 * h + 32 * (k & 1) + l] >> (4 * (k >> 1))) & 0x0f;
        const int high = (b.qh[32 * h + l] >> (2 * k)) & 3;
        q[128 * h + 32 * k + l] = static_cast<int8_t>((low | (high << 4)) - 32);
      }
}

}  // namespace pagoda::quant

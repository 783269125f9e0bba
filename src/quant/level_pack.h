// Packing of per-value integer levels into the bit layouts of blocks.h: the inverse of
// k_unpack.h (and of the legacy formats' nibble layout). The round-to-nearest quantizers
// and the calibrated ones (block_grid.h: GPTQ picks each level itself) both write blocks
// through these, so each layout is encoded in one place.
#pragma once

#include <cstdint>
#include <cstring>

#include "quant/blocks.h"

namespace pagoda::quant {

// 32-value formats: value j in the low nibble of qs[j], value j + 16 in the high nibble.
template <typename Level>
inline void pack_nibbles(const Level* q, uint8_t* qs) {
  for (int j = 0; j < kQK / 2; ++j)
    qs[j] = static_cast<uint8_t>((q[j] & 0x0f) | ((q[j + kQK / 2] & 0x0f) << 4));
}

// Q5_0/Q5_1: bit 4 of value j is bit j of the 32-bit little-endian qh.
template <typename Level>
inline void pack_fifth_bits(const Level* q, uint8_t* qh) {
  uint32_t bits = 0;
  for (int j = 0; j < kQK; ++j) bits |= static_cast<uint32_t>((q[j] >> 4) & 1) << j;
  std::memcpy(qh, &bits, 4);
}

// 2-bit levels, four per byte: byte l of half h holds values 128h + l + 32k at bits 2k.
template <typename Level>
inline void pack_2bit(const Level* L, uint8_t* qs) {
  for (int h = 0; h < 2; ++h)
    for (int l = 0; l < 32; ++l) {
      const Level* v = L + 128 * h + l;
      qs[32 * h + l] = static_cast<uint8_t>((v[0] & 3) | ((v[32] & 3) << 2) | ((v[64] & 3) << 4) | ((v[96] & 3) << 6));
    }
}

// Q3_K levels 0..7 (the value's level plus 4): levels 4..7 keep their high bit in hmask
// (bit e/32 of byte e%32), the low two bits go to qs.
inline void pack_q3_K(const int8_t* L, BlockQ3_K& b) {
  std::memset(b.hmask, 0, sizeof(b.hmask));
  uint8_t low[kQK_K];
  for (int e = 0; e < kQK_K; ++e) {
    int l = L[e];
    if (l > 3) {
      b.hmask[e % 32] = static_cast<uint8_t>(b.hmask[e % 32] | (1 << (e / 32)));
      l -= 4;
    }
    low[e] = static_cast<uint8_t>(l);
  }
  pack_2bit(low, b.qs);
}

// Q4_K levels 0..15: group 2c+s is nibble s of qs[32c .. 32c+31].
inline void pack_q4_K(const uint8_t* L, BlockQ4_K& b) {
  for (int c = 0; c < 4; ++c)
    for (int l = 0; l < 32; ++l) b.qs[32 * c + l] = static_cast<uint8_t>(L[64 * c + l] | (L[64 * c + 32 + l] << 4));
}

// Q5_K levels 0..31: Q4_K's nibbles, the fifth bit of value l of group g in bit g of qh[l].
inline void pack_q5_K(const uint8_t* L, BlockQ5_K& b) {
  std::memset(b.qh, 0, sizeof(b.qh));
  for (int c = 0; c < 4; ++c)
    for (int l = 0; l < 32; ++l) {
      const int lo = L[64 * c + l];
      const int hi = L[64 * c + 32 + l];
      b.qh[l] = static_cast<uint8_t>(b.qh[l] | ((lo >> 4) << (2 * c)) | ((hi >> 4) << (2 * c + 1)));
      b.qs[32 * c + l] = static_cast<uint8_t>((lo & 0x0f) | ((hi & 0x0f) << 4));
    }
}

// Q6_K levels 0..63 (the value's level plus 32): low nibbles to ql, top two bits to qh.
inline void pack_q6_K(const int8_t* L, BlockQ6_K& b) {
  for (int h = 0; h < 2; ++h)
    for (int l = 0; l < 32; ++l) {
      const int8_t* v = L + 128 * h + l;
      b.ql[64 * h + l] = static_cast<uint8_t>((v[0] & 0x0f) | ((v[64] & 0x0f) << 4));
      b.ql[64 * h + 32 + l] = static_cast<uint8_t>((v[32] & 0x0f) | ((v[96] & 0x0f) << 4));
      b.qh[32 * h + l] =
          static_cast<uint8_t>((v[0] >> 4) | ((v[32] >> 4) << 2) | ((v[64] >> 4) << 4) | ((v[96] >> 4) << 6));
    }
}

}  // namespace pagoda::quant

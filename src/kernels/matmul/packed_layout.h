// Internal: the byte layout of one block of a 16-row panel (packed_weights.h), shared by
// the packer and the AVX-512 bodies. Pure constants.
//
// A block: kRegs registers of 64 bytes (lane r = quant bytes 4j..4j+3 of row r, XORed
// with kFlip), then the 16 rows' FP16 scales. Q8_0's quants become u = q + 128; Q4_0's
// bytes stay as stored, low nibbles = values 4j..4j+3, high nibbles = values 16+4j..,
// each u = q + 8. Either way the integer dot is sum(u * x) - kOffset * sum(x).
//
// Q4_K (K4Layout), per super-block of 256 values: 32 registers of quants (register
// 8c + k, lane r = qs bytes 32c+4k..32c+4k+3 of row r: low nibbles values 64c+4k.., of
// sub-block 2c; high nibbles values 64c+32+4k.., of sub-block 2c+1), the 6-bit scales
// as bytes (sub-block j: 16 bytes, one per row), the 6-bit mins as bytes in pairs
// (pair i: row r's m[2i], m[2i+1] at 2r, so that widened to 16 bits they are the dwords
// vpdpwssd takes), then the 16 rows' FP16 d and FP16 dmin.
#pragma once

#include <cstddef>
#include <cstdint>

#include "quant/blocks.h"

namespace pagoda::packed {

template <typename B>
struct Layout;

template <>
struct Layout<BlockQ4_0> {
  static constexpr int kRegs = 4;
  static constexpr uint8_t kFlip = 0;
  static constexpr int kOffset = 8;
  static constexpr bool kHighBits = false;
  static constexpr size_t kScaleAt = 64 * kRegs;
  static constexpr size_t kBlockBytes = kScaleAt + 32;
};

// Q5_0: Q4_0's nibble registers, then one register of the rows' qh words (lane r = row
// r's 32 fifth bits, bit i for value i), then the scales; u = (nibble | bit << 4) = q + 16.
template <>
struct Layout<BlockQ5_0> {
  static constexpr int kRegs = 4;
  static constexpr uint8_t kFlip = 0;
  static constexpr int kOffset = 16;
  static constexpr bool kHighBits = true;
  static constexpr size_t kQhAt = 64 * kRegs;
  static constexpr size_t kScaleAt = kQhAt + 64;
  static constexpr size_t kBlockBytes = kScaleAt + 32;
};

template <>
struct Layout<BlockQ8_0> {
  static constexpr int kRegs = 8;
  static constexpr uint8_t kFlip = 0x80;
  static constexpr int kOffset = 128;
  static constexpr bool kHighBits = false;
  static constexpr size_t kScaleAt = 64 * kRegs;
  static constexpr size_t kBlockBytes = kScaleAt + 32;
};

struct K4Layout {
  static constexpr size_t kScalesAt = 32 * 64;
  static constexpr size_t kMinsAt = kScalesAt + 8 * 16;
  static constexpr size_t kDAt = kMinsAt + 4 * 32;
  static constexpr size_t kDminAt = kDAt + 32;
  static constexpr size_t kBlockBytes = kDminAt + 32;
};

}  // namespace pagoda::packed

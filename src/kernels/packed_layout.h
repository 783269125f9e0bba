// Internal: the byte layout of one block of a 16-row panel (packed_weights.h), shared by
// the packer and the AVX-512 bodies. Pure constants.
//
// A block: kRegs registers of 64 bytes (lane r = quant bytes 4j..4j+3 of row r, XORed
// with kFlip), then the 16 rows' FP16 scales. Q8_0's quants become u = q + 128; Q4_0's
// bytes stay as stored, low nibbles = values 4j..4j+3, high nibbles = values 16+4j..,
// each u = q + 8. Either way the integer dot is sum(u * x) - kOffset * sum(x).
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
  static constexpr size_t kScaleAt = 64 * kRegs;
  static constexpr size_t kBlockBytes = kScaleAt + 32;
};

template <>
struct Layout<BlockQ8_0> {
  static constexpr int kRegs = 8;
  static constexpr uint8_t kFlip = 0x80;
  static constexpr int kOffset = 128;
  static constexpr size_t kScaleAt = 64 * kRegs;
  static constexpr size_t kBlockBytes = kScaleAt + 32;
};

}  // namespace pagoda::packed

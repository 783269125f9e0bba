// Internal: the byte layout of a 16-row panel (packed_weights.h), shared by the packer
// and the AVX-512 bodies. Pure constants.
//
// Legacy formats (Layout<B>), a block: kRegs registers of 64 bytes (lane r = quant bytes
// 4j..4j+3 of row r, XORed with kFlip), Q5_0's qh register after them, then the 16 rows'
// FP16 scales. Q8_0's quants become u = q + 128; Q4_0's bytes stay as stored, low nibbles
// = values 4j..4j+3, high nibbles = values 16+4j.., each u = q + 8. Either way the integer
// dot is sum(u * x) - kOffset * sum(x). A panel takes exactly the bytes of its 16 rows in
// the file. (Their blocks of 4.5, 5.5 and 8.5 lines split every other block's loads; moving
// the scales out to make whole-line blocks, in pairs as Q6_K's or in a tail after the
// panel's blocks, measured slower from DRAM, Q5_0 by about 2x: bench/micro packed_gemv.)
//
// Q4_K (K4Layout), per super-block of 256 values: 32 registers of quants (register
// 8c + k, lane r = qs bytes 32c+4k..32c+4k+3 of row r: low nibbles values 64c+4k.., of
// sub-block 2c; high nibbles values 64c+32+4k.., of sub-block 2c+1), the 6-bit scales
// as bytes (sub-block j: 16 bytes, one per row), the 6-bit mins as bytes in pairs
// (pair i: row r's m[2i], m[2i+1] at 2r, so that widened to 16 bits they are the dwords
// vpdpwssd takes), then the 16 rows' FP16 d and FP16 dmin.
//
// Q6_K (K6Layout), per super-block: the 16 signed scales as bytes (sub-block j: 16
// bytes, one per row), then per half n of the super-block (128 values) 24 registers in
// the order the GEMV reads them: ql register 16n + k (lane r = ql bytes 4(16n+k).. of row
// r) followed by qh register 8n + k (qh bytes 4(8n+k)..) for k = 0..7, then ql registers
// 16n + 8 .. 16n + 15 (their qh fields are those of the same qh registers): 52 lines. The
// 16 rows' FP16 d sit outside the blocks, in pairs: [d of blocks 2p and 2p+1, one line]
// [block 2p][block 2p+1] (an odd last block gets a line of its own), so every block starts
// on a line and the panel is read strictly front to back. In the file's order (all ql,
// then all qh, blocks of 52.5 lines) the GEMV read 7-12.7 GB/s from DRAM, front to back
// 18.6 (bench/micro packed_gemv, one thread); with all of a panel's d in one tail after
// its blocks, a stream touched once every two blocks, it was slower again. The bytes are
// the file's, only moved (plus 32 per panel for an odd block count), and each lane keeps
// the file's pairing of a ql byte with the qh byte whose four 2-bit fields complete its
// two nibbles and those of the ql byte 32 further on.
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
  static constexpr bool kPairs = false;
};

// Q5_0: Q4_0's nibble registers, then one register of the rows' qh words (lane r = row
// r's 32 fifth bits, bit i for value i); u = (nibble | bit << 4) = q + 16.
template <>
struct Layout<BlockQ5_0> {
  static constexpr int kRegs = 4;
  static constexpr uint8_t kFlip = 0;
  static constexpr int kOffset = 16;
  static constexpr bool kHighBits = true;
  static constexpr size_t kQhAt = 64 * kRegs;
  static constexpr size_t kScaleAt = kQhAt + 64;
  static constexpr size_t kBlockBytes = kScaleAt + 32;
  static constexpr bool kPairs = false;
};

template <>
struct Layout<BlockQ8_0> {
  static constexpr int kRegs = 8;
  static constexpr uint8_t kFlip = 0x80;
  static constexpr int kOffset = 128;
  static constexpr bool kHighBits = false;
  static constexpr size_t kScaleAt = 64 * kRegs;
  static constexpr size_t kBlockBytes = kScaleAt + 32;
  static constexpr bool kPairs = false;
};

struct K4Layout {
  static constexpr size_t kScalesAt = 32 * 64;
  static constexpr size_t kMinsAt = kScalesAt + 8 * 16;
  static constexpr size_t kDAt = kMinsAt + 4 * 32;
  static constexpr size_t kDminAt = kDAt + 32;
  static constexpr size_t kBlockBytes = kDminAt + 32;  // 37 lines, d and dmin inline
  static constexpr bool kPairs = false;
};

struct K6Layout {
  static constexpr size_t kScalesAt = 0;
  static constexpr size_t kHalfAt = 16 * 16;
  static constexpr size_t kHalfBytes = 24 * 64;
  static constexpr size_t kBlockBytes = kHalfAt + 2 * kHalfBytes;
  static constexpr bool kPairs = true;
  // Register offsets within a block: ql group s (0: ql bytes 0-31 of half n, 1: 32-63),
  // k = 0..7, and the qh register completing both groups' k-th registers.
  static constexpr size_t ql_at(int n, int s, int k) {
    return kHalfAt + n * kHalfBytes + (s == 0 ? 2 * k : 16 + k) * 64;
  }
  static constexpr size_t qh_at(int n, int k) { return kHalfAt + n * kHalfBytes + (2 * k + 1) * 64; }
};

// Where block b of a panel starts, where its 16 FP16 scales are (layouts with kPairs),
// and the bytes of a panel of nb blocks.
template <typename L>
constexpr size_t block_at(int64_t b) {
  if constexpr (!L::kPairs) {
    return static_cast<size_t>(b) * L::kBlockBytes;
  } else {
    static_assert(L::kBlockBytes % 64 == 0, "paired blocks start on cache lines");
    return static_cast<size_t>(b / 2) * (64 + 2 * L::kBlockBytes) + 64 + static_cast<size_t>(b % 2) * L::kBlockBytes;
  }
}
template <typename L>
constexpr size_t scales_at(int64_t b) {
  return static_cast<size_t>(b / 2) * (64 + 2 * L::kBlockBytes) + 32 * static_cast<size_t>(b % 2);
}
template <typename L>
constexpr size_t panel_bytes(int64_t nb) {
  if constexpr (!L::kPairs) return static_cast<size_t>(nb) * L::kBlockBytes;
  return static_cast<size_t>(nb / 2) * (64 + 2 * L::kBlockBytes) + (nb % 2 != 0 ? 64 + L::kBlockBytes : 0);
}
static_assert(panel_bytes<K6Layout>(2) == 32 * sizeof(BlockQ6_K));

}  // namespace pagoda::packed

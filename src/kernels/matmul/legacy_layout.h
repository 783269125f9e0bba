// Internal: where the fields of the 32-value weight formats sit, for the SIMD bodies in
// legacy_avx2.cpp / legacy_avx512.cpp. Constants, and one template (with_block) that the
// bodies instantiate with lambdas of their own file, so each instantiation has internal
// linkage and nothing compiled for one target can leak into another at link time.
//
// Every body computes a block's integer dot the same way: weights as unsigned bytes u in
// value order, u = q + kOffset (Q8_0: q ^ 0x80 = q + 128), so that
//   sum((u - kOffset) * x) = sum(u * x) - kOffset * sum(x),
// a u8 x s8 product (maddubs / dpbusd) plus a correction taken from the activation block
// alone. Q4_1/Q5_1 have no offset and add m * dx * sum(x) instead.
#pragma once

#include <cstddef>

#include "quant/blocks.h"
#include "tensor/dtype.h"

namespace pagoda::simd::legacy {

// Calls f.template operator()<Block>() with the block struct of a 32-value format t;
// false (calling nothing) for any other type.
template <class F>
bool with_block(DType t, F&& f) {
  switch (t) {
    case DType::Q4_0: f.template operator()<BlockQ4_0>(); return true;
    case DType::Q4_1: f.template operator()<BlockQ4_1>(); return true;
    case DType::Q5_0: f.template operator()<BlockQ5_0>(); return true;
    case DType::Q5_1: f.template operator()<BlockQ5_1>(); return true;
    case DType::Q8_0: f.template operator()<BlockQ8_0>(); return true;
    default: return false;
  }
}

template <typename B>
struct Layout;

template <>
struct Layout<BlockQ4_0> {
  static constexpr int kBits = 4;
  static constexpr int kOffset = 8;
  static constexpr bool kMin = false;
  static constexpr int kQs = offsetof(BlockQ4_0, qs);
  static constexpr int kQh = -1;
  static constexpr int kM = -1;
};

template <>
struct Layout<BlockQ4_1> {
  static constexpr int kBits = 4;
  static constexpr int kOffset = 0;
  static constexpr bool kMin = true;
  static constexpr int kQs = offsetof(BlockQ4_1, qs);
  static constexpr int kQh = -1;
  static constexpr int kM = offsetof(BlockQ4_1, m);
};

template <>
struct Layout<BlockQ5_0> {
  static constexpr int kBits = 5;
  static constexpr int kOffset = 16;
  static constexpr bool kMin = false;
  static constexpr int kQs = offsetof(BlockQ5_0, qs);
  static constexpr int kQh = offsetof(BlockQ5_0, qh);
  static constexpr int kM = -1;
};

template <>
struct Layout<BlockQ5_1> {
  static constexpr int kBits = 5;
  static constexpr int kOffset = 0;
  static constexpr bool kMin = true;
  static constexpr int kQs = offsetof(BlockQ5_1, qs);
  static constexpr int kQh = offsetof(BlockQ5_1, qh);
  static constexpr int kM = offsetof(BlockQ5_1, m);
};

template <>
struct Layout<BlockQ8_0> {
  static constexpr int kBits = 8;
  static constexpr int kOffset = 128;
  static constexpr bool kMin = false;
  static constexpr int kQs = offsetof(BlockQ8_0, qs);
  static constexpr int kQh = -1;
  static constexpr int kM = -1;
};

// The activation blocks (Q8_0): d first, the 32 quants after it.
inline constexpr int kXQs = offsetof(BlockQ8_0, qs);
inline constexpr int kXBytes = sizeof(BlockQ8_0);

// Clamp and rounding constants of quant::nearest_int (src/quant/scalar_math.h), which the
// activation conversion must reproduce bit for bit: clamp to +-kRoundLimit, add kRoundMagic
// and the low byte of the float's bits is the int8 result.
inline constexpr float kRoundLimit = 4194303.0f;
inline constexpr float kRoundMagic = 12582912.0f;

// Tokens whose converted activations a tile body stages at once (matmul hands 64).
inline constexpr int kTileTokens = 64;

}  // namespace pagoda::simd::legacy

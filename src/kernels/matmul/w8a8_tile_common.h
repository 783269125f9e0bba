// Internal: the plain (non-SIMD) helpers the W8A8 tile bodies share, included by
// w8a8_avx512_body.h and w8a8_avx2.cpp. Everything lands in an anonymous namespace, so
// each target's file has its own copy (nothing compiled for one instruction set can be
// linked into code that runs on another).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/matmul/w8a8_kernels.h"
#include "kernels/simd/tile_buffer.h"

namespace pagoda::simd {
namespace {

struct alignas(64) Z64 {
  uint8_t b[64];
};


using Buffer = TileBuffer<Z64>;

// Tokens multiplied per repacked panel: their staged blocks (256 * n bytes) stay in L2
// while the panel is reused; a multiple of the block of 8.
constexpr int64_t kChunk = 256;
constexpr int kBlock = static_cast<int>(kW8A8BlockTokens);
static_assert(kChunk % kW8A8BlockTokens == 0);

// Per-token terms of a chunk's tokens, padded with zeros to whole blocks: the offset
// correction -128 * sum(x) (for VNNI's unsigned weights) and the scale.
struct TokenTerms {
  int32_t corr[kChunk];
  float scale[kChunk];
};

inline void token_terms(const W8A8Acts& x, int64_t c0, int64_t tc, TokenTerms& out) {
  for (int64_t t = 0; t < kChunk; ++t) {
    out.corr[t] = t < tc ? -128 * x.sum[c0 + t] : 0;
    out.scale[t] = t < tc ? x.scale[c0 + t] : 0.0f;
  }
}

}  // namespace
}  // namespace pagoda::simd

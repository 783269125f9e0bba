#include "quant/block_grid.h"

#include <algorithm>
#include <cstring>

#include "quant/blocks.h"
#include "quant/formats.h"
#include "quant/k_unpack.h"
#include "quant/level_pack.h"
#include "quant/scalar_math.h"

namespace pagoda {
namespace {


template <typename Block>
const Block& block_of(const BlockGrid& g) {
  static_assert(sizeof(Block) <= BlockGrid::kMaxBytes);
  return *reinterpret_cast<const Block*>(g.block);
}

void fill(BlockGrid& g, int first, int count, float scale, float offset) {
  std::fill_n(g.scale + first, count, scale);
  std::fill_n(g.offset + first, count, offset);
}

}  // namespace

bool has_block_grid(DType t) {
  switch (t) {
    case DType::Q4_0:
    case DType::Q4_1:
    case DType::Q5_0:
    case DType::Q5_1:
    case DType::Q8_0:
    case DType::Q2_K:
    case DType::Q3_K:
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K:
      return true;
    default:
      return false;
  }
}

void make_block_grid(DType t, const float* x, BlockGrid& g) {
  g.type = t;
  g.n = static_cast<int>(dtype_info(t).block_size);
  quantize_row(t, x, g.block, g.n);
  switch (t) {
    case DType::Q4_0:
      g.level_min = -8, g.level_max = 7;
      fill(g, 0, kQK, fp16_to_fp32(block_of<BlockQ4_0>(g).d), 0.0f);
      break;
    case DType::Q4_1:
      g.level_min = 0, g.level_max = 15;
      fill(g, 0, kQK, fp16_to_fp32(block_of<BlockQ4_1>(g).d), fp16_to_fp32(block_of<BlockQ4_1>(g).m));
      break;
    case DType::Q5_0:
      g.level_min = -16, g.level_max = 15;
      fill(g, 0, kQK, fp16_to_fp32(block_of<BlockQ5_0>(g).d), 0.0f);
      break;
    case DType::Q5_1:
      g.level_min = 0, g.level_max = 31;
      fill(g, 0, kQK, fp16_to_fp32(block_of<BlockQ5_1>(g).d), fp16_to_fp32(block_of<BlockQ5_1>(g).m));
      break;
    case DType::Q8_0:
      g.level_min = -128, g.level_max = 127;
      fill(g, 0, kQK, fp16_to_fp32(block_of<BlockQ8_0>(g).d), 0.0f);
      break;
    case DType::Q2_K: {
      const auto& b = block_of<BlockQ2_K>(g);
      g.level_min = 0, g.level_max = 3;
      const float d = fp16_to_fp32(b.d), dmin = fp16_to_fp32(b.dmin);
      for (int k = 0; k < 16; ++k)
        fill(g, 16 * k, 16, d * static_cast<float>(b.scales[k] & 0x0f), -(dmin * static_cast<float>(b.scales[k] >> 4)));
      break;
    }
    case DType::Q3_K: {
      const auto& b = block_of<BlockQ3_K>(g);
      g.level_min = -4, g.level_max = 3;
      int sc[16];
      quant::unpack_q3_K_scales(b.scales, sc);
      const float d = fp16_to_fp32(b.d);
      for (int k = 0; k < 16; ++k) fill(g, 16 * k, 16, d * static_cast<float>(sc[k]), 0.0f);
      break;
    }
    case DType::Q4_K:
    case DType::Q5_K: {
      // Q4_K and Q5_K share the header layout (d, dmin, 12 bytes of 6-bit scales/mins).
      const auto& b = block_of<BlockQ4_K>(g);
      g.level_min = 0, g.level_max = t == DType::Q4_K ? 15 : 31;
      const float d = fp16_to_fp32(b.d), dmin = fp16_to_fp32(b.dmin);
      for (int k = 0; k < 8; ++k) {
        uint8_t sc, m;
        quant::unpack_k4_scale_min(k, b.scales, &sc, &m);
        fill(g, 32 * k, 32, d * static_cast<float>(sc), -(dmin * static_cast<float>(m)));
      }
      break;
    }
    case DType::Q6_K: {
      const auto& b = block_of<BlockQ6_K>(g);
      g.level_min = -32, g.level_max = 31;
      const float d = fp16_to_fp32(b.d);
      for (int k = 0; k < 16; ++k) fill(g, 16 * k, 16, d * static_cast<float>(b.scales[k]), 0.0f);
      break;
    }
    default:
      g.n = 0;  // has_block_grid(t) is false: callers check it first
  }
}

int nearest_level(const BlockGrid& g, int e, float v) {
  const float s = g.scale[e];
  if (s == 0.0f) return g.level_min < 0 ? 0 : g.level_min;  // every level decodes to the offset
  const int l = quant::nearest_int((v - g.offset[e]) / s);
  return std::clamp(l, g.level_min, g.level_max);
}

void encode_block_levels(const BlockGrid& g, const int* levels, void* dst) {
  const size_t bytes = row_bytes(g.type, g.n);
  std::memcpy(dst, g.block, bytes);
  switch (g.type) {
    case DType::Q4_0: {
      int q[kQK];
      for (int j = 0; j < kQK; ++j) q[j] = levels[j] + 8;
      quant::pack_nibbles(q, static_cast<BlockQ4_0*>(dst)->qs);
      break;
    }
    case DType::Q4_1:
      quant::pack_nibbles(levels, static_cast<BlockQ4_1*>(dst)->qs);
      break;
    case DType::Q5_0: {
      int q[kQK];
      for (int j = 0; j < kQK; ++j) q[j] = levels[j] + 16;
      auto* b = static_cast<BlockQ5_0*>(dst);
      quant::pack_nibbles(q, b->qs);
      quant::pack_fifth_bits(q, b->qh);
      break;
    }
    case DType::Q5_1: {
      auto* b = static_cast<BlockQ5_1*>(dst);
      quant::pack_nibbles(levels, b->qs);
      quant::pack_fifth_bits(levels, b->qh);
      break;
    }
    case DType::Q8_0: {
      auto* b = static_cast<BlockQ8_0*>(dst);
      for (int j = 0; j < kQK; ++j) b->qs[j] = static_cast<int8_t>(levels[j]);
      break;
    }
    case DType::Q2_K:
      quant::pack_2bit(levels, static_cast<BlockQ2_K*>(dst)->qs);
      break;
    case DType::Q3_K: {
      int8_t L[kQK_K];
      for (int e = 0; e < kQK_K; ++e) L[e] = static_cast<int8_t>(levels[e] + 4);
      quant::pack_q3_K(L, *static_cast<BlockQ3_K*>(dst));
      break;
    }
    case DType::Q4_K:
    case DType::Q5_K: {
      uint8_t L[kQK_K];
      for (int e = 0; e < kQK_K; ++e) L[e] = static_cast<uint8_t>(levels[e]);
      if (g.type == DType::Q4_K) quant::pack_q4_K(L, *static_cast<BlockQ4_K*>(dst));
      else quant::pack_q5_K(L, *static_cast<BlockQ5_K*>(dst));
      break;
    }
    case DType::Q6_K: {
      int8_t L[kQK_K];
      for (int e = 0; e < kQK_K; ++e) L[e] = static_cast<int8_t>(levels[e] + 32);
      quant::pack_q6_K(L, *static_cast<BlockQ6_K*>(dst));
      break;
    }
    default:
      break;
  }
}

}  // namespace pagoda

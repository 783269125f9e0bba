// The grid a quantized block's values can take once its scales are fixed: value e is
// scale[e] * level + offset[e] for an integer level in [level_min, level_max]. Calibrated
// quantizers use it to decide the levels themselves while keeping a block format every
// kernel runs: GPTQ (gptq.h) takes a block's scales from round to nearest on the weights
// as they stand when it reaches the block, then picks each value's level in turn, feeding
// each rounding error forward into the values it has not quantized yet.
#pragma once

#include <cstdint>

#include "tensor/dtype.h"

namespace pagoda {

struct BlockGrid {
  static constexpr int kMaxValues = 256;
  static constexpr int kMaxBytes = 256;
  DType type = DType::F32;
  int n = 0;  // values in the block (the format's block size)
  int level_min = 0, level_max = 0;
  float scale[kMaxValues];
  float offset[kMaxValues];
  alignas(16) uint8_t block[kMaxBytes];  // the round-to-nearest block; holds the scales
};

// Formats with a grid: Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K Q4_K Q5_K Q6_K.
bool has_block_grid(DType t);

// Quantizes one block of x (dtype_info(t).block_size values) to nearest and reads back
// the grid its scales define.
void make_block_grid(DType t, const float* x, BlockGrid& grid);

// The level nearest to v on value e's grid (round half away from zero, clamped, as the
// round-to-nearest quantizers do).
int nearest_level(const BlockGrid& grid, int e, float v);

inline float grid_value(const BlockGrid& grid, int e, int level) {
  return grid.scale[e] * static_cast<float>(level) + grid.offset[e];
}

// Writes the grid's block with these levels (grid.n of them) to dst.
void encode_block_levels(const BlockGrid& grid, const int* levels, void* dst);

}  // namespace pagoda

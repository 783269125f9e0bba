// A read-only view of a 2-D weight matrix stored row by row in any format: `rows`
// output features, each a row of `cols` values taking `row_stride` bytes. A 1-D tensor
// is a single row. Views never own memory; weights stay in the model file's mapping.
// W8A8 weights (src/quant/w8a8.h) are type I8 with one FP32 scale per row in row_scales.
// A matrix repacked at load time (src/kernels/matmul/packed_weights.h) also has `packed`, which
// the matmuls read instead of the rows; `data` stays valid for row lookups.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tensor/dtype.h"

namespace pagoda {

struct WeightView {
  DType type = DType::F32;
  int64_t rows = 0;
  int64_t cols = 0;
  size_t row_stride = 0;
  const uint8_t* data = nullptr;
  const float* row_scales = nullptr;  // W8A8 only, one per row: value = q * row_scales[r]
  const uint8_t* packed = nullptr;     // 16-row panels of the same values, or null

  const uint8_t* row(int64_t r) const { return data + static_cast<size_t>(r) * row_stride; }
  bool empty() const { return data == nullptr; }
};

}  // namespace pagoda

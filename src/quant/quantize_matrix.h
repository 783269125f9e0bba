// Whole weight matrices to and from a storage format, split over the thread pool. Rows of
// a matrix are independent in every format (a block never spans two rows), so the pool
// takes whole rows and the bytes do not depend on the thread count. These are the
// building blocks of `pagoda quantize`: decode a source tensor to float rows, check them,
// encode them in the target format (through a QuantStrategy, quant_strategy.h).
#pragma once

#include <cstdint>

#include "base/thread_pool.h"
#include "tensor/dtype.h"

namespace pagoda {

// dst = rows x cols floats w encoded as `type` (quantize_row on each row): row r starts
// at dst + r * row_bytes(type, cols). Preconditions as quantize_row's: can_quantize(type),
// cols a multiple of the block size, dst aligned to the type's block struct.
void quantize_matrix(DType type, const float* w, int64_t rows, int64_t cols, void* dst, ThreadPool& pool);

// out = the rows x cols values of src, stored as `type` (dequantize_row on each row).
// Preconditions as dequantize_row's.
void dequantize_matrix(DType type, const void* src, int64_t rows, int64_t cols, float* out, ThreadPool& pool);

// The first row holding a NaN or an infinity, or -1 when every value is finite.
int64_t first_non_finite_row(const float* w, int64_t rows, int64_t cols, ThreadPool& pool);

}  // namespace pagoda

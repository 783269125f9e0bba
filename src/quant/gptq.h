// GPTQ-style calibrated quantization (Frantar et al., 2022). A linear layer's output error
// for a weight error D is sum over calibration inputs x of |D x|^2 = tr(D H D^T) with
// H = sum x x^T. GPTQ quantizes a row one input column at a time and moves each column's
// rounding error onto the columns not yet quantized, along the matching row of the upper
// Cholesky factor of H^-1, so later roundings cancel part of it. Block formats keep
// working: a block's scales come from round to nearest on the row as it stands when GPTQ
// reaches the block (block_grid.h), then each value's level is chosen on that grid.
// Rows are independent given H, so they are split over the thread pool.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "base/thread_pool.h"
#include "tensor/dtype.h"

namespace pagoda {

struct GptqFactor {
  int64_t cols = 0;
  std::vector<float> u;          // cols x cols, upper triangle: Cholesky factor of (H + damping)^-1
  std::vector<uint8_t> dead;     // columns no calibration token touched (H_ii = 0)
  double damp = 0;               // the relative damping that made H positive definite
};

// Factor of H (cols x cols, symmetric, row-major) with damp * mean(diag H) added to the
// diagonal; the damping is raised (x10, up to 3 times) when H is still not positive
// definite. Fails when H is empty or all zero.
Result<GptqFactor> gptq_factor(const float* hessian, int64_t cols, double damp = 0.01);

// Quantizes rows x f.cols floats `w` (row-major; overwritten with the error-compensated
// values) to type t (has_block_grid(t), f.cols a multiple of its block size); dst gets
// rows * row_bytes(t, f.cols) bytes. Dead columns are zeroed first (they never reach the
// output, and zeros keep the block scales tight).
void gptq_quantize(DType t, const GptqFactor& f, float* w, int64_t rows, void* dst, ThreadPool& pool);

// SparseGPT (Frantar & Alistarh, 2023) for the 2:4 formats (quant/sparse24.h), pruning
// and rounding in one pass of GPTQ's loop. At the first column of each 64-position block,
// each group of four keeps the two columns whose removal would cost most, w_c^2 / U_cc^2
// on the row as it stands, and the block's scale is the dense format's over those kept
// values; then column by column a dropped weight becomes zero and a kept one its nearest
// level, and each change is moved onto the later columns along U's row, so the kept
// weights absorb what the dropped ones did and later roundings what earlier ones cost.
// rows x f.cols floats `w` (overwritten; f.cols a multiple of 64) into dst, rows *
// row_bytes(t, f.cols) bytes, t Q8_0_S24 or Q4_0_S24. Dead columns are zeroed first (and
// so dropped first).
void sparsegpt_quantize_2_4(DType t, const GptqFactor& f, float* w, int64_t rows, void* dst, ThreadPool& pool);

}  // namespace pagoda

// Linear layers: y[t, r] = sum_i W[r, i] * x[t, i] for a batch of token rows x against a
// weight matrix in any supported format. Activations are converted once per call to the
// weight format's vec-dot type (src/quant/formats.h), then output rows are split across
// the thread pool; each worker streams its weight rows once for all tokens of the batch.
// Scratch space is reused across calls, so the per-token path does not allocate.
// W8A8 weights (type I8 with row_scales, src/quant/w8a8.h) take their own path
// (w8a8_kernels.h): activations become int8 per token and every token goes to the tile.
#pragma once

#include <cstdint>
#include <span>

#include "base/thread_pool.h"
#include "tensor/weight_view.h"

namespace pagoda {

// x: [n_tokens, w.cols] floats (row stride w.cols); y: [n_tokens, w.rows] floats.
void matmul(const WeightView& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool);

// Several matrices reading the same input (a layer's Q/K/V, or gate/up): y[i] gets
// matmul(ws[i], x). A decode step (one token) with matrices of one activation format (vec-dot type) converts the
// activations once and runs all their rows in one parallel region, so the threads meet
// once instead of once per matrix; anything else runs them one by one.
void matmul_shared_input(std::span<const WeightView* const> ws, const float* x, int64_t n_tokens,
                         std::span<float* const> ys, ThreadPool& pool);

// One product of a group that matmul_jobs runs together.
struct MatmulJob {
  const WeightView* w = nullptr;
  const float* x = nullptr;  // [n_tokens, w->cols]
  int64_t n_tokens = 0;
  float* y = nullptr;        // [n_tokens, w->rows]
};

// Products with inputs of their own (the experts a mixture-of-experts layer selected, each
// on the tokens routed to it): all their output rows in one parallel region, the threads
// splitting jobs x rows, so a decode step that touches a few small experts keeps every
// thread busy and meets once per group instead of once per matrix. Jobs reading the same
// input (an expert's gate and up) convert it once. Each y equals matmul(*w, x, n_tokens, y)
// bit for bit; W8A8 jobs run one by one through matmul.
void matmul_jobs(std::span<const MatmulJob> jobs, ThreadPool& pool);

// One row of a weight matrix dequantized to floats (embedding lookup).
void dequantize_weight_row(const WeightView& w, int64_t row, float* out);

}  // namespace pagoda

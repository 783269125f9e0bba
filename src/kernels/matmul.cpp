#include "kernels/matmul.h"

#include <algorithm>
#include <vector>

#include "kernels/dot_kernels.h"
#include "quant/formats.h"

namespace pagoda {
namespace {

// Converted activations of the current call. Only the engine thread calls matmul, so one
// buffer per thread is enough and never shrinks.
thread_local std::vector<uint8_t> t_xq;

// Output rows per work item. Small enough that two threads split even a 256-row matrix,
// large enough that a tile kernel has rows to reuse each activation block on.
constexpr int64_t kRowGrain = 16;
// Tokens per tile: the activation rows a tile keeps hot while it streams weight rows.
constexpr int64_t kTokenTile = 64;

}  // namespace

void matmul(const WeightView& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool) {
  const DotKernels& k = dot_kernels(w.type);
  const DType xt = vec_dot_type(w.type);
  const size_t xrow = row_bytes(xt, w.cols);
  const uint8_t* xb = reinterpret_cast<const uint8_t*>(x);
  if (xt != DType::F32) {
    t_xq.resize(xrow * static_cast<size_t>(n_tokens));
    uint8_t* dst = t_xq.data();
    pool.parallel_for(n_tokens, 1, [&](int64_t b, int64_t e, int) {
      for (int64_t t = b; t < e; ++t) k.quantize_x(x + t * w.cols, dst + static_cast<size_t>(t) * xrow, w.cols);
    });
    xb = dst;
  }
  if (n_tokens == 1) {
    // Decode: a GEMV, bound by reading the weights once.
    pool.parallel_for(w.rows, kRowGrain, [&](int64_t r0, int64_t r1, int) {
      for (int64_t r = r0; r < r1; ++r) y[r] = k.dot(w.cols, w.row(r), xb);
    });
    return;
  }
  pool.parallel_for(w.rows, kRowGrain, [&](int64_t r0, int64_t r1, int) {
    for (int64_t t0 = 0; t0 < n_tokens; t0 += kTokenTile) {
      const int64_t tokens = std::min(kTokenTile, n_tokens - t0);
      k.tile(w.cols, w.row(r0), w.row_stride, r1 - r0, xb + static_cast<size_t>(t0) * xrow, xrow, tokens,
             y + t0 * w.rows + r0, static_cast<size_t>(w.rows));
    }
  });
}

void dequantize_weight_row(const WeightView& w, int64_t row, float* out) {
  dequantize_row(w.type, w.row(row), out, w.cols);
}

}  // namespace pagoda

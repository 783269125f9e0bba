#include "kernels/matmul.h"

#include <algorithm>
#include <vector>

#include "quant/formats.h"

namespace pagoda {
namespace {

// Converted activations of the current call. Only the engine thread calls matmul, so one
// buffer per thread is enough and never shrinks.
thread_local std::vector<uint8_t> t_xq;

}  // namespace

void matmul(const WeightView& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool) {
  const DType xt = vec_dot_type(w.type);
  const size_t xrow = row_bytes(xt, w.cols);
  const void* xq = x;
  if (xt != DType::F32) {
    t_xq.resize(xrow * static_cast<size_t>(n_tokens));
    uint8_t* dst = t_xq.data();
    pool.parallel_for(n_tokens, 1, [&](int64_t b, int64_t e, int) {
      for (int64_t t = b; t < e; ++t)
        quantize_activation_row(xt, x + t * w.cols, dst + static_cast<size_t>(t) * xrow, w.cols);
    });
    xq = dst;
  }
  const auto* xb = static_cast<const uint8_t*>(xq);
  // Rows in groups of 4 keep the split cache-line friendly for y writes.
  pool.parallel_for(w.rows, 4, [&](int64_t r0, int64_t r1, int) {
    constexpr int64_t kTokTile = 8;
    for (int64_t t0 = 0; t0 < n_tokens; t0 += kTokTile) {
      const int64_t t1 = std::min(n_tokens, t0 + kTokTile);
      for (int64_t r = r0; r < r1; ++r) {
        const uint8_t* wr = w.row(r);
        for (int64_t t = t0; t < t1; ++t)
          y[t * w.rows + r] = vec_dot(w.type, w.cols, wr, xb + static_cast<size_t>(t) * xrow);
      }
    }
  });
}

void dequantize_weight_row(const WeightView& w, int64_t row, float* out) {
  dequantize_row(w.type, w.row(row), out, w.cols);
}

}  // namespace pagoda

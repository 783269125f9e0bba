#include "quant/quantize_matrix.h"

#include <algorithm>
#include <atomic>
#include <cmath>

#include "quant/formats.h"

namespace pagoda {
namespace {

// Rows per pool chunk: enough values that a chunk is worth a thread's wake-up (a few
// microseconds), while a 640-row matrix still spreads over many threads.
int64_t row_grain(int64_t cols) { return std::max<int64_t>(1, 8192 / std::max<int64_t>(1, cols)); }

}  // namespace

void quantize_matrix(DType type, const float* w, int64_t rows, int64_t cols, void* dst, ThreadPool& pool) {
  const size_t row = row_bytes(type, cols);
  auto* out = static_cast<uint8_t*>(dst);
  pool.parallel_for(rows, row_grain(cols), [&](int64_t begin, int64_t end, int) {
    for (int64_t r = begin; r < end; ++r)
      quantize_row(type, w + r * cols, out + static_cast<size_t>(r) * row, cols);
  });
}

void dequantize_matrix(DType type, const void* src, int64_t rows, int64_t cols, float* out, ThreadPool& pool) {
  const size_t row = row_bytes(type, cols);
  const auto* in = static_cast<const uint8_t*>(src);
  pool.parallel_for(rows, row_grain(cols), [&](int64_t begin, int64_t end, int) {
    for (int64_t r = begin; r < end; ++r)
      dequantize_row(type, in + static_cast<size_t>(r) * row, out + r * cols, cols);
  });
}

int64_t first_non_finite_row(const float* w, int64_t rows, int64_t cols, ThreadPool& pool) {
  std::atomic<int64_t> first{rows};
  pool.parallel_for(rows, row_grain(cols), [&](int64_t begin, int64_t end, int) {
    for (int64_t r = begin; r < end; ++r) {
      const float* x = w + r * cols;
      bool finite = true;
      for (int64_t i = 0; i < cols; ++i) finite &= std::isfinite(x[i]);
      if (!finite) {
        int64_t seen = first.load();
        while (r < seen && !first.compare_exchange_weak(seen, r)) {
        }
        return;  // later rows of this chunk cannot be earlier
      }
    }
  });
  const int64_t r = first.load();
  return r < rows ? r : -1;
}

}  // namespace pagoda

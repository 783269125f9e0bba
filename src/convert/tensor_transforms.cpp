#include "convert/tensor_transforms.h"

#include <cstring>

namespace pagoda {
namespace {

template <bool kForward>
void permute(const float* in, float* out, int64_t n_rows, int64_t row_len, int32_t heads) {
  const int64_t head_rows = n_rows / heads, half = head_rows / 2;
  const size_t row_bytes = static_cast<size_t>(row_len) * sizeof(float);
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < half; ++i)
      for (int64_t j = 0; j < 2; ++j) {
        const int64_t interleaved = h * head_rows + 2 * i + j;
        const int64_t halves = h * head_rows + j * half + i;
        const int64_t dst = kForward ? interleaved : halves, src = kForward ? halves : interleaved;
        std::memcpy(out + dst * row_len, in + src * row_len, row_bytes);
      }
}

}  // namespace

void rope_permute_rows(const float* in, float* out, int64_t n_rows, int64_t row_len, int32_t heads) {
  permute<true>(in, out, n_rows, row_len, heads);
}

void rope_unpermute_rows(const float* in, float* out, int64_t n_rows, int64_t row_len, int32_t heads) {
  permute<false>(in, out, n_rows, row_len, heads);
}

void add_one(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += 1.0f;
}

}  // namespace pagoda

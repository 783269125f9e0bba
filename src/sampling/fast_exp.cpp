#include "sampling/fast_exp.h"

namespace pagoda {
namespace {

// Eight independent float accumulators let the compiler keep the sum in vector
// registers (it may not reassociate one scalar float sum); each block's partial sums are
// folded into a double before float rounding can build up.
constexpr int kLanes = 8;

template <bool kStore>
double exp_block(const float* x, size_t n, float shift, float scale, float* out) {
  float acc[kLanes] = {};
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) {
      const float e = exp_nonpositive((x[i + j] - shift) * scale);
      if constexpr (kStore) out[i + j] = e;
      acc[j] += e;
    }
  }
  double sum = 0;
  for (; i < n; ++i) {
    const float e = exp_nonpositive((x[i] - shift) * scale);
    if constexpr (kStore) out[i] = e;
    sum += e;
  }
  for (float a : acc) sum += a;
  return sum;
}

}  // namespace

double sum_exp(std::span<const float> x, float shift, float scale) {
  double total = 0;
  for (size_t b = 0; b < x.size(); b += kExpBlock) {
    total += exp_block<false>(x.data() + b, std::min(kExpBlock, x.size() - b), shift, scale,
                              nullptr);
  }
  return total;
}

double exp_terms(std::span<const float> x, float shift, float scale, float* out,
                 double* block_sums) {
  double total = 0;
  for (size_t b = 0; b < x.size(); b += kExpBlock) {
    const double s = exp_block<true>(x.data() + b, std::min(kExpBlock, x.size() - b), shift,
                                     scale, out + b);
    block_sums[b / kExpBlock] = s;
    total += s;
  }
  return total;
}

}  // namespace pagoda

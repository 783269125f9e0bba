// Inputs shared by the micro-benchmarks: seeded normal floats, and quantized weight
// matrices built from a few distinct rows copied round (speed does not depend on the
// values, and quantizing every row of a big matrix is slow).
#pragma once

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "quant/formats.h"
#include "tensor/dtype.h"

namespace pagoda::bench {

inline std::vector<float> random_floats(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& f : v) f = nd(rng);
  return v;
}

inline std::vector<uint8_t> random_weights(DType t, int64_t rows, int64_t cols) {
  const size_t rb = row_bytes(t, cols);
  std::vector<uint8_t> distinct(rb * 8);
  for (int k = 0; k < 8; ++k) quantize_row(t, random_floats(cols, 1 + k).data(), distinct.data() + k * rb, cols);
  std::vector<uint8_t> w(rb * static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) std::memcpy(w.data() + r * rb, distinct.data() + (r % 8) * rb, rb);
  return w;
}

}  // namespace pagoda::bench

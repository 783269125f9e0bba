// Shared helpers of the kernel tests whose weights dot with Q8_0 activations (the legacy
// formats and the 2:4 sparse ones): random activation rows and the tolerance a SIMD body
// may differ from the scalar reference by.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/matmul/dot_kernels.h"
#include "quant/formats.h"

namespace pagoda::testing {

// tokens rows of n normal floats converted to Q8_0 by k.quantize_x.
inline std::vector<uint8_t> q8_activations(const DotKernels& k, int64_t tokens, int64_t n, std::mt19937& rng) {
  const size_t xb = row_bytes(DType::Q8_0, n);
  std::vector<uint8_t> x(xb * tokens);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> f(n);
  for (int64_t t = 0; t < tokens; ++t) {
    for (auto& v : f) v = nd(rng);
    k.quantize_x(f.data(), x.data() + t * xb, n);
  }
  return x;
}

// |simd - ref| bound from the magnitudes of the dequantized terms (as simd_dot_test.cpp).
inline double q8_dot_tolerance(DType t, const uint8_t* w, const uint8_t* x, int64_t n) {
  std::vector<float> wd(n), xd(n);
  dequantize_row(t, w, wd.data(), n);
  dequantize_row(DType::Q8_0, x, xd.data(), n);
  double mag = 0;
  for (int64_t i = 0; i < n; ++i) mag += std::fabs(static_cast<double>(wd[i]) * xd[i]);
  return 1e-5 * mag + 1e-6;
}

}  // namespace pagoda::testing

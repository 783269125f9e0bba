// Every SIMD body against the scalar reference, on every target this CPU can run.
// Activation conversion must be bit-exact (it decides integer inputs downstream). Dots sum
// exact integer block products with float scales in a different order, so they agree to
// float rounding of the sum: |simd - ref| <= 1e-5 * sum |terms| bounds that with margin.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/matmul/dot_kernels.h"
#include "quant/formats.h"

namespace pagoda {
namespace {

struct Param {
  DType type;
  SimdTarget target;
};

std::vector<Param> all_params() {
  std::vector<Param> out;
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1,
                  DType::Q8_0, DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K})
    for (SimdTarget s : runnable_simd_targets())
      if (s != SimdTarget::kScalar) out.push_back({t, s});
  return out;
}

class SimdDotTest : public ::testing::TestWithParam<Param> {};

// A row of n floats with outliers, so blocks see very different scales.
std::vector<float> random_row(std::mt19937& rng, int64_t n, float scale) {
  std::normal_distribution<float> nd(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = nd(rng);
  for (int64_t i = 0; i < n; i += 97) v[i] *= 8.0f;
  return v;
}

TEST_P(SimdDotTest, MatchesScalarReference) {
  const auto [t, target] = GetParam();
  const DotKernels simd = dot_kernels(t, target);
  const DotKernels ref = dot_kernels(t, SimdTarget::kScalar);
  const DType xt = vec_dot_type(t);
  std::mt19937 rng(11);
  for (int64_t n : {256, 512, 2048, 4096 + 256}) {
    const int64_t rows = 7, tokens = 5;
    const size_t wb = row_bytes(t, n), xbytes = row_bytes(xt, n);
    std::vector<uint8_t> w(wb * rows), xs(xbytes * tokens), xr(xbytes * tokens);
    for (int64_t r = 0; r < rows; ++r) quantize_row(t, random_row(rng, n, 0.05f).data(), w.data() + r * wb, n);
    std::vector<std::vector<float>> xf;
    for (int64_t k = 0; k < tokens; ++k) {
      xf.push_back(random_row(rng, n, 1.0f));
      simd.quantize_x(xf.back().data(), xs.data() + k * xbytes, n);
      ref.quantize_x(xf.back().data(), xr.data() + k * xbytes, n);
      ASSERT_EQ(std::memcmp(xs.data() + k * xbytes, xr.data() + k * xbytes, xbytes), 0)
          << "activation conversion differs, n=" << n;
    }
    // Bound: float rounding of a sum is at most ~n*eps*sum|terms|; use the magnitudes of
    // the dequantized rows.
    std::vector<float> wd(n), xd(n);
    std::vector<float> ys(rows * tokens), yr(rows * tokens);
    simd.tile(n, w.data(), wb, rows, xs.data(), xbytes, tokens, ys.data(), rows);
    for (int64_t k = 0; k < tokens; ++k) {
      dequantize_row(xt, xr.data() + k * xbytes, xd.data(), n);
      for (int64_t r = 0; r < rows; ++r) {
        dequantize_row(t, w.data() + r * wb, wd.data(), n);
        double mag = 0;
        for (int64_t i = 0; i < n; ++i) mag += std::fabs(static_cast<double>(wd[i]) * xd[i]);
        const float want = ref.dot(n, w.data() + r * wb, xr.data() + k * xbytes);
        const float got = simd.dot(n, w.data() + r * wb, xs.data() + k * xbytes);
        const double tol = 1e-5 * mag + 1e-6;
        ASSERT_NEAR(got, want, tol) << "dot n=" << n << " row " << r << " token " << k;
        ASSERT_NEAR(ys[k * rows + r], want, tol) << "tile n=" << n << " row " << r << " token " << k;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTargets, SimdDotTest, ::testing::ValuesIn(all_params()),
                         [](const auto& info) {
                           return std::string(dtype_name(info.param.type)) + "_" +
                                  simd_target_name(info.param.target);
                         });

}  // namespace
}  // namespace pagoda

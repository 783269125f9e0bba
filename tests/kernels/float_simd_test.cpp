// The float formats' SIMD activation conversions (quantize_x for F16 and BF16) against the
// scalar ones on inputs simd_dot_test does not reach: every exponent, subnormals, ties,
// infinities, quiet and signalling NaNs with payloads, and row lengths with tails. The
// conversions must be bit-exact: they decide the inputs of every F16/BF16 dot.
#include <gtest/gtest.h>

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

class FloatQuantizeXTest : public ::testing::TestWithParam<Param> {};

std::vector<float> awkward_values(size_t n) {
  const uint32_t special[] = {
      0x00000000, 0x80000000, 0x00000001, 0x807fffff, 0x00800000,  // zeros, float subnormals, min normal
      0x33000000, 0x33000001, 0x387fc000, 0x38800000,              // FP16 underflow edge, FP16 subnormal range
      0x477fe000, 0x477fefff, 0x477ff000, 0x7f7fffff,              // FP16 max, its rounding edge, overflow
      0x3f808000, 0x3f818000, 0x3f800001, 0x3f807fff,              // BF16 ties to even, just above/below
      0x7f800000, 0xff800000,                                      // infinities
      0x7fc00000, 0xffc00001, 0x7f800001, 0x7fa00000, 0xff812345,  // quiet and signalling NaNs with payloads
  };
  std::mt19937 rng(5);
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) {
    uint32_t u = static_cast<uint32_t>(rng());
    if (i % 5 == 0) u = special[(i / 5) % (sizeof(special) / sizeof(special[0]))];
    std::memcpy(&v[i], &u, 4);
  }
  return v;
}

TEST_P(FloatQuantizeXTest, BitExactOnAwkwardInputs) {
  const auto [t, target] = GetParam();
  const DotKernels simd = dot_kernels(t, target);
  const DType xt = vec_dot_type(t);
  for (int64_t n : {1, 7, 8, 15, 16, 17, 31, 33, 1000, 4099}) {
    const std::vector<float> x = awkward_values(static_cast<size_t>(n));
    std::vector<uint8_t> got(row_bytes(xt, n)), want(row_bytes(xt, n));
    simd.quantize_x(x.data(), got.data(), n);
    quantize_activation_row(xt, x.data(), want.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      uint16_t g, w;
      std::memcpy(&g, got.data() + 2 * i, 2);
      std::memcpy(&w, want.data() + 2 * i, 2);
      uint32_t bits;
      std::memcpy(&bits, &x[i], 4);
      ASSERT_EQ(g, w) << "n=" << n << " i=" << i << " input bits 0x" << std::hex << bits;
    }
  }
}

std::vector<Param> params() {
  std::vector<Param> out;
  for (DType t : {DType::F16, DType::BF16})
    for (SimdTarget s : runnable_simd_targets())
      if (s != SimdTarget::kScalar) out.push_back({t, s});
  return out;
}

GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(FloatQuantizeXTest);
INSTANTIATE_TEST_SUITE_P(Targets, FloatQuantizeXTest, ::testing::ValuesIn(params()), [](const auto& info) {
  return std::string(dtype_name(info.param.type)) + "_" + simd_target_name(info.param.target);
});

}  // namespace
}  // namespace pagoda

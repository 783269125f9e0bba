// Inputs at the edges of each format: all zeros, a single huge value, a negative extreme,
// Inf/NaN for the float formats, and the bookkeeping fields (Q8_K's bsums).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "base/fp16.h"
#include "quant/blocks.h"
#include "quant/formats.h"
#include "quant_test_util.h"

namespace pagoda {
namespace {

using testing::RowBuffer;

std::vector<float> round_trip(DType t, const std::vector<float>& x) {
  const auto n = static_cast<int64_t>(x.size());
  RowBuffer q(t, n);
  quantize_row(t, x.data(), q.data(), n);
  std::vector<float> y(x.size());
  dequantize_row(t, q.data(), y.data(), n);
  return y;
}

TEST(EdgeCases, ZerosStayZeroAndFinite) {
  for (DType t : testing::dequantizable_types()) {
    const std::vector<float> x(512, 0.0f);
    for (float v : round_trip(t, x)) ASSERT_EQ(v, 0.0f) << dtype_name(t);
  }
}

// One value far above the rest: it must come back nearly exact (it sets the scale) and
// the small values may collapse to zero but must not blow up.
TEST(EdgeCases, SingleHugeValue) {
  for (DType t : testing::dequantizable_types()) {
    for (float big : {1000.0f, -1000.0f}) {
      std::vector<float> x(512);
      for (size_t i = 0; i < x.size(); ++i) x[i] = 0.01f * static_cast<float>(static_cast<int>(i % 7) - 3);
      x[100] = big;
      const auto y = round_trip(t, x);
      // Largest level of the coarsest format (Q2_K, levels 0..3 with a 4-bit scale of a
      // 4-bit super-scale) still lands within 10% of the value that set it.
      EXPECT_NEAR(y[100], big, 0.1 * std::fabs(big)) << dtype_name(t);
      for (size_t i = 0; i < x.size(); ++i) {
        if (i == 100) continue;
        ASSERT_TRUE(std::isfinite(y[i])) << dtype_name(t);
        // Every other value is within one quantization step of the block holding 1000,
        // i.e. a few percent of it; 0.15 * |big| covers Q2_K's 1/3 step on a 4-bit scale.
        ASSERT_LE(std::fabs(y[i] - x[i]), 0.15f * std::fabs(big)) << dtype_name(t) << " i=" << i;
      }
    }
  }
}

// Symmetric formats put the extreme on their most negative level; with a negative
// extreme that level is exact up to the FP16 scale (Q4_0: d = max / -8).
TEST(EdgeCases, NegativeExtremeIsExactOnSymmetricFormats) {
  for (DType t : {DType::Q4_0, DType::Q5_0, DType::Q8_0}) {
    std::vector<float> x(32);
    for (size_t i = 0; i < x.size(); ++i) x[i] = 0.1f * static_cast<float>(i % 5);
    x[7] = -3.0f;
    const auto y = round_trip(t, x);
    EXPECT_NEAR(y[7], -3.0f, 3.0f / 1024) << dtype_name(t);
  }
}

TEST(EdgeCases, F16OverflowInfAndNan) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> x = {65504.0f, 65520.0f, 1e6f, -1e6f, inf, -inf, std::nanf(""), 1e-8f, -0.0f};
  RowBuffer q(DType::F16, static_cast<int64_t>(x.size()));
  quantize_row(DType::F16, x.data(), q.data(), static_cast<int64_t>(x.size()));
  const auto* h = static_cast<const uint16_t*>(q.data());
  EXPECT_EQ(h[0], 0x7bff);  // largest finite half
  EXPECT_EQ(h[1], 0x7c00);  // halfway to the next step rounds to even: +Inf
  EXPECT_EQ(h[2], 0x7c00);
  EXPECT_EQ(h[3], 0xfc00);
  EXPECT_EQ(h[4], 0x7c00);
  EXPECT_EQ(h[5], 0xfc00);
  EXPECT_EQ(h[6] & 0x7c00, 0x7c00);
  EXPECT_NE(h[6] & 0x03ff, 0);  // still a NaN
  EXPECT_EQ(h[7], 0x0000);      // 1e-8 < 2^-25 (half the smallest subnormal) rounds to zero
  EXPECT_EQ(h[8], 0x8000);
  std::vector<float> y(x.size());
  dequantize_row(DType::F16, q.data(), y.data(), static_cast<int64_t>(x.size()));
  EXPECT_TRUE(std::isnan(y[6]));
  EXPECT_EQ(y[4], inf);
}

// Signalling NaN payloads survive F16 -> F32 unchanged, as in numpy (gguf-py).
TEST(EdgeCases, F16NanPayloadsKept) {
  const uint16_t h[2] = {0x7c01, 0xfd55};
  float y[2];
  dequantize_row(DType::F16, h, y, 2);
  EXPECT_EQ(fp32_to_bits(y[0]), 0x7f802000u);
  EXPECT_EQ(fp32_to_bits(y[1]), 0xffaaa000u);
}

TEST(EdgeCases, Bf16KeepsNanAndRoundsToEven) {
  const std::vector<float> x = {std::nanf(""), fp32_from_bits(0x3f808000u), fp32_from_bits(0x3f818000u)};
  RowBuffer q(DType::BF16, 3);
  quantize_row(DType::BF16, x.data(), q.data(), 3);
  const auto* h = static_cast<const uint16_t*>(q.data());
  EXPECT_TRUE(std::isnan(bf16_to_fp32(h[0])));
  EXPECT_EQ(h[1], 0x3f80);
  EXPECT_EQ(h[2], 0x3f82);
}

// bsums must be the sums of each group of 16 quants: the K-quant dots read the min terms
// from them instead of from qs.
TEST(EdgeCases, Q8KBlockSumsMatchQuants) {
  const auto x = testing::make_row(testing::Shape::kOutliers, 4 * kQK_K, 21);
  RowBuffer q(DType::Q8_K, 4 * kQK_K);
  quantize_row(DType::Q8_K, x.data(), q.data(), 4 * kQK_K);
  const auto* b = static_cast<const BlockQ8_K*>(q.data());
  for (int i = 0; i < 4; ++i) {
    int lo = 0, hi = 0;
    for (int g = 0; g < 16; ++g) {
      int sum = 0;
      for (int l = 0; l < 16; ++l) sum += b[i].qs[16 * g + l];
      EXPECT_EQ(b[i].bsums[g], sum);
    }
    for (int j = 0; j < kQK_K; ++j) {
      lo = std::min<int>(lo, b[i].qs[j]);
      hi = std::max<int>(hi, b[i].qs[j]);
    }
    EXPECT_GE(lo, -127);  // the extreme maps to -127, never -128
    EXPECT_LE(hi, 127);
    EXPECT_TRUE(lo == -127 || hi == 127);
  }
}

// A constant row: the affine formats encode it through the min alone.
TEST(EdgeCases, ConstantRow) {
  for (DType t : testing::dense_types()) {
    const std::vector<float> x(256, 0.75f);
    for (float v : round_trip(t, x)) ASSERT_NEAR(v, 0.75f, 0.75f / 256) << dtype_name(t);
  }
}

}  // namespace
}  // namespace pagoda

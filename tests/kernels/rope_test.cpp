#include "kernels/elementwise/rope.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace pagoda {
namespace {

TEST(Rope, PositionZeroIsIdentity) {
  std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8};
  const auto orig = x;
  rope_apply(x.data(), 2, 4, 0, RopeParams{RopeLayout::kNeox, 4, 10000.0f, 1.0f});
  EXPECT_EQ(x, orig);
}

TEST(Rope, NormLayoutRotatesAdjacentPairs) {
  std::vector<float> x = {1, 0, 1, 0};
  rope_apply(x.data(), 1, 4, 3, RopeParams{RopeLayout::kNorm, 4, 10000.0f, 1.0f});
  // pair 0: angle 3; pair 1: angle 3 * 10000^(-1/2) = 0.03
  EXPECT_NEAR(x[0], std::cos(3.0f), 1e-6);
  EXPECT_NEAR(x[1], std::sin(3.0f), 1e-6);
  EXPECT_NEAR(x[2], std::cos(0.03f), 1e-6);
  EXPECT_NEAR(x[3], std::sin(0.03f), 1e-6);
}

TEST(Rope, NeoxLayoutRotatesHalves) {
  std::vector<float> x = {1, 1, 0, 0};
  rope_apply(x.data(), 1, 4, 2, RopeParams{RopeLayout::kNeox, 4, 100.0f, 1.0f});
  // pair (0, 2): angle 2; pair (1, 3): angle 2 * 100^(-1/2) = 0.2
  EXPECT_NEAR(x[0], std::cos(2.0f), 1e-6);
  EXPECT_NEAR(x[2], std::sin(2.0f), 1e-6);
  EXPECT_NEAR(x[1], std::cos(0.2f), 1e-6);
  EXPECT_NEAR(x[3], std::sin(0.2f), 1e-6);
}

TEST(Rope, DotProductDependsOnlyOnRelativePosition) {
  std::vector<float> q = {0.3f, -1.2f, 0.7f, 2.0f}, k = {1.1f, 0.4f, -0.5f, 0.9f};
  auto dot_at = [&](int pq, int pk) {
    auto a = q, b = k;
    RopeParams p{RopeLayout::kNeox, 4, 10000.0f, 1.0f};
    rope_apply(a.data(), 1, 4, pq, p);
    rope_apply(b.data(), 1, 4, pk, p);
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2] + a[3] * b[3];
  };
  EXPECT_NEAR(dot_at(7, 3), dot_at(104, 100), 1e-4);
}

TEST(Rope, QueryAndKeyTogetherEqualEachAlone) {
  std::vector<float> q = {0.3f, -1.2f, 0.7f, 2.0f, 1.5f, -0.1f, 0.2f, 0.9f}, k = {1.1f, 0.4f, -0.5f, 0.9f};
  const RopeParams p{RopeLayout::kNeox, 4, 10000.0f, 1.0f};
  auto q1 = q, k1 = k;
  rope_apply(q1.data(), 2, 4, 37, p);
  rope_apply(k1.data(), 1, 4, 37, p);
  rope_apply(q.data(), 2, k.data(), 1, 4, 37, p);
  EXPECT_EQ(q, q1);
  EXPECT_EQ(k, k1);
}

TEST(Rope, PartialRotationLeavesTailUntouched) {
  std::vector<float> x = {1, 2, 3, 4, 5, 6};
  rope_apply(x.data(), 1, 6, 5, RopeParams{RopeLayout::kNorm, 4, 10000.0f, 1.0f});
  EXPECT_EQ(x[4], 5);
  EXPECT_EQ(x[5], 6);
}

// llama.cpp's correction range for Llama-like YaRN (128 rotary dims, 4096 original
// positions, base 10000, betas 32 and 1): pairs 20..46 by the closed form.
TEST(Rope, YarnCorrectionRangeFollowsTheClosedForm) {
  float dims[2];
  rope_yarn_corr_dims(128, 4096, 10000.0f, 32.0f, 1.0f, dims);
  auto corr = [](double n_rot) { return 128 * std::log(4096 / (n_rot * 2 * M_PI)) / (2 * std::log(10000.0)); };
  EXPECT_EQ(dims[0], std::floor(corr(32)));
  EXPECT_EQ(dims[1], std::ceil(corr(1)));
  EXPECT_EQ(dims[0], 20.0f);
  EXPECT_EQ(dims[1], 46.0f);
}

// YaRN: a pair below the correction range keeps its extrapolated (unscaled) angle, one
// above it takes the interpolated angle (times freq_scale); both are scaled by mscale.
TEST(Rope, YarnPairsBelowTheRangeExtrapolateAndAboveInterpolate) {
  RopeParams p{RopeLayout::kNeox, 8, 10000.0f, 0.25f};
  p.ext_factor = 1.0f;
  p.attn_factor = 1.0f;
  p.corr_dims[0] = 1.0f;
  p.corr_dims[1] = 2.0f;
  const int pos = 9;
  std::vector<float> x = {1, 1, 1, 1, 0, 0, 0, 0};  // (x[i], x[i + 4]) = (1, 0): rotates to (cos, sin)
  rope_apply(x.data(), 1, 8, pos, p);
  const float mscale = 1.0f + 0.1f * std::log(4.0f);
  const float theta_scale = std::pow(10000.0f, -2.0f / 8.0f);
  const float angle0 = pos, angle3 = 0.25f * (pos * theta_scale * theta_scale * theta_scale);
  EXPECT_NEAR(x[0], std::cos(angle0) * mscale, 1e-5);  // pair 0 < corr_dims[0]: extrapolated
  EXPECT_NEAR(x[4], std::sin(angle0) * mscale, 1e-5);
  EXPECT_NEAR(x[3], std::cos(angle3) * mscale, 1e-5);  // pair 3 > corr_dims[1]: interpolated
  EXPECT_NEAR(x[7], std::sin(angle3) * mscale, 1e-5);
}

TEST(Rope, FrequencyFactorsDivideEachPairsAngle) {
  const float factors[2] = {1.0f, 8.0f};
  RopeParams p{RopeLayout::kNorm, 4, 10000.0f, 1.0f};
  p.freq_factors = factors;
  std::vector<float> x = {1, 0, 1, 0};
  rope_apply(x.data(), 1, 4, 50, p);
  const float angle1 = 50.0f * std::pow(10000.0f, -0.5f) / 8.0f;
  EXPECT_NEAR(x[0], std::cos(50.0f), 1e-5);
  EXPECT_NEAR(x[2], std::cos(angle1), 1e-5);
  EXPECT_NEAR(x[3], std::sin(angle1), 1e-5);
}

}  // namespace
}  // namespace pagoda

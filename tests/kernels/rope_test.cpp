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

}  // namespace
}  // namespace pagoda

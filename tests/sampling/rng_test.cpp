#include <gtest/gtest.h>

#include <vector>

#include "sampling/reference_chain.h"
#include "sampling/sampler.h"

namespace pagoda {
namespace {

std::vector<int32_t> draws(uint64_t seed, int n) {
  auto p = testing::plain_params(seed);
  Sampler s(p);
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) {
    std::vector<float> logits(64, 0.0f);  // uniform over 64 tokens
    out.push_back(s.sample(logits, {}));
  }
  return out;
}

TEST(Rng, SameSeedSameSequence) {
  EXPECT_EQ(draws(42, 200), draws(42, 200));
}

TEST(Rng, DifferentSeedDifferentSequence) {
  // Two independent uniform sequences over 64 tokens agree on all 200 draws with
  // probability 64^-200; on most draws they should differ.
  const auto a = draws(1, 200);
  const auto b = draws(2, 200);
  int same = 0;
  for (size_t i = 0; i < a.size(); ++i) same += a[i] == b[i];
  EXPECT_LT(same, 20);
}

TEST(Rng, FixedSeedIsKeptAndRandomSeedIsDrawn) {
  EXPECT_EQ(Sampler(testing::plain_params(1234)).seed(), 1234u);
  SamplingParams p;
  p.seed = kRandomSeed;
  // Equal 64-bit draws from std::random_device would mean it is not random at all.
  EXPECT_NE(Sampler(p).seed(), Sampler(p).seed());
}

TEST(Rng, DistributionLeavesTheRngAlone) {
  Sampler sampler(testing::plain_params(5));
  std::vector<float> logits(64, 0.0f);
  EXPECT_EQ(sampler.distribution(logits, {}).size(), 64u);
  const auto reference = draws(5, 3);
  for (int i = 0; i < 3; ++i) {
    std::vector<float> l(64, 0.0f);
    EXPECT_EQ(sampler.sample(l, {}), reference[i]);
  }
}

}  // namespace
}  // namespace pagoda

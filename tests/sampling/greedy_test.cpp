#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "sampling/reference_chain.h"
#include "sampling/sampler.h"

namespace pagoda {
namespace {

TEST(Argmax, PicksLargest) {
  const std::vector<float> logits = {0.1f, -2.0f, 3.5f, 3.4f, 0.0f};
  EXPECT_EQ(argmax(logits), 2);
}

TEST(Argmax, TiesGoToLowestId) {
  std::vector<float> logits(1000, 0.0f);
  logits[700] = 5.0f;
  logits[300] = 5.0f;
  logits[999] = 5.0f;
  EXPECT_EQ(argmax(logits), 300);
}

TEST(Argmax, EdgeCases) {
  EXPECT_EQ(argmax(std::span<const float>()), -1);
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> masked = {-inf, -inf, -inf};
  EXPECT_EQ(argmax(masked), 0);
  const std::vector<float> with_nan = {1.0f, std::nanf(""), 2.0f};
  EXPECT_EQ(argmax(with_nan), 2);
}

TEST(Greedy, IgnoresFiltersAndRng) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.top_k = 1;
  p.top_p = 0.01f;
  p.min_p = 0.9f;
  p.seed = 7;
  Sampler s(p);
  for (int i = 0; i < 10; ++i) {
    std::vector<float> logits = {1.0f, 4.0f, 4.0f, -1.0f};
    EXPECT_EQ(s.sample(logits, {}), 1);
  }
  p.temperature = -1.0f;
  Sampler negative(p);
  std::vector<float> logits = {1.0f, 0.0f, 9.0f};
  EXPECT_EQ(negative.sample(logits, {}), 2);
}

TEST(Greedy, PenaltiesStillApply) {
  // llama.cpp runs the penalties before its greedy pick, so a repeated token can lose.
  auto p = testing::plain_params();
  p.temperature = 0.0f;
  p.repeat_penalty = 2.0f;
  Sampler s(p);
  std::vector<float> logits = {3.0f, 2.0f};
  const std::vector<int32_t> history = {0};
  EXPECT_EQ(s.sample(logits, history), 1);
}

TEST(Sampler, AllMaskedFallsBackToLowestId) {
  const float inf = std::numeric_limits<float>::infinity();
  Sampler s(testing::plain_params());
  std::vector<float> logits = {-inf, -inf};
  EXPECT_EQ(s.sample(logits, {}), 0);
  std::vector<float> empty;
  EXPECT_EQ(s.sample(empty, {}), -1);
}

}  // namespace
}  // namespace pagoda

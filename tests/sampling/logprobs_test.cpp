#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "sampling/logprobs.h"

namespace pagoda {
namespace {

TEST(Logprobs, LogSoftmaxOfRawLogits) {
  const std::vector<float> logits = {1.0f, 3.0f, 2.0f, 3.0f};
  const double norm = std::log(std::exp(1.0) + 2 * std::exp(3.0) + std::exp(2.0));
  EXPECT_NEAR(log_sum_exp(logits), norm, 1e-6);
  const auto top = top_logprobs(logits, 3);
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].first, 1);  // ties: lower id first
  EXPECT_EQ(top[1].first, 3);
  EXPECT_EQ(top[2].first, 2);
  EXPECT_NEAR(top[0].second, 3.0 - norm, 1e-6);
  EXPECT_NEAR(top[2].second, 2.0 - norm, 1e-6);
}

TEST(Logprobs, LargeValuesAndMaskedTokens) {
  const float inf = std::numeric_limits<float>::infinity();
  // Stable at magnitudes where e^x overflows a float.
  const std::vector<float> logits = {1000.0f, -inf, 1000.0f};
  EXPECT_NEAR(log_sum_exp(logits), 1000.0 + std::log(2.0), 1e-4);
  const auto top = top_logprobs(logits, 5);
  ASSERT_EQ(top.size(), 2u);
  EXPECT_NEAR(top[0].second, -std::log(2.0), 1e-6);
  EXPECT_TRUE(top_logprobs(logits, 0).empty());
  EXPECT_EQ(log_sum_exp(std::vector<float>{-inf}), -std::numeric_limits<double>::infinity());
}

TEST(Logprobs, SumsToOneOnALargeVocabulary) {
  std::vector<float> logits(100000);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = std::sin(static_cast<float>(i)) * 8;
  const double norm = log_sum_exp(logits);
  double total = 0;
  for (float l : logits) total += std::exp(l - norm);
  EXPECT_NEAR(total, 1.0, 1e-6);
}

}  // namespace
}  // namespace pagoda

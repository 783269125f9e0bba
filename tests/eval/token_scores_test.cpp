#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "eval/running_stats.h"
#include "eval/token_scores.h"

namespace pagoda {
namespace {

TEST(TokenScores, LogNormArgmaxAndNll) {
  const std::vector<float> logits = {1.0f, 3.0f, 2.0f, -1.0f};
  const double norm = std::log(std::exp(1.0) + std::exp(3.0) + std::exp(2.0) + std::exp(-1.0));
  const RowSummary s = summarize_row(logits);
  EXPECT_NEAR(s.log_norm, norm, 1e-6);
  EXPECT_EQ(s.argmax, 1);
  EXPECT_NEAR(token_nll(logits, 2, s.log_norm), norm - 2.0, 1e-6);
  // A uniform row: every token has NLL log(V).
  const std::vector<float> flat(1000, 0.25f);
  const RowSummary f = summarize_row(flat);
  EXPECT_NEAR(token_nll(flat, 999, f.log_norm), std::log(1000.0), 1e-6);
}

TEST(TokenScores, TiesGoToTheLowestId) {
  EXPECT_EQ(summarize_row(std::vector<float>{0.0f, 5.0f, 1.0f, 5.0f}).argmax, 1);
  EXPECT_EQ(summarize_row(std::vector<float>{7.0f, 7.0f}).argmax, 0);
}

TEST(TokenScores, StableAtLargeMagnitudesAndMasked) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> logits = {1000.0f, -inf, 1000.0f};
  const RowSummary s = summarize_row(logits);
  EXPECT_NEAR(s.log_norm, 1000.0 + std::log(2.0), 1e-4);
  EXPECT_EQ(s.argmax, 0);
  EXPECT_TRUE(std::isinf(token_nll(logits, 1, s.log_norm)));
  EXPECT_TRUE(std::isnan(summarize_row(std::vector<float>{1.0f, NAN}).log_norm));
}

TEST(TokenScores, LogSoftmaxSumsToOneOnAGemmaSizedRow) {
  std::vector<float> logits(262144), out(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = std::sin(static_cast<float>(i) * 0.37f) * 12;
  log_softmax(logits, out);
  double total = 0;
  for (float v : out) total += std::exp(static_cast<double>(v));
  EXPECT_NEAR(total, 1.0, 1e-5);
}

TEST(RunningStats, MeanAndStandardErrorAsLlamaPerplexity) {
  const std::vector<double> xs = {2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0};
  RunningMean m;
  for (double x : xs) m.add(x);
  EXPECT_EQ(m.count(), 8);
  EXPECT_DOUBLE_EQ(m.mean(), 5.0);
  // population variance 4, so SE = sqrt(4 / 7)
  EXPECT_NEAR(m.standard_error(), std::sqrt(4.0 / 7.0), 1e-12);
  const ValueWithError ppl = perplexity_of(m);
  EXPECT_NEAR(ppl.value, std::exp(5.0), 1e-9);
  EXPECT_NEAR(ppl.error, std::exp(5.0) * std::sqrt(4.0 / 7.0), 1e-9);
  RunningMean a, b;
  for (size_t i = 0; i < xs.size(); ++i) (i % 2 ? a : b).add(xs[i]);
  a.merge(b);
  EXPECT_DOUBLE_EQ(a.mean(), m.mean());
  EXPECT_EQ(RunningMean().standard_error(), 0.0);
}

TEST(RunningStats, QuantilesAndProportions) {
  const std::vector<float> v = {1, 2, 3, 4};
  EXPECT_DOUBLE_EQ(quantile_sorted(v, 0.5), 2.5);
  EXPECT_DOUBLE_EQ(quantile_sorted(v, 0.0), 1.0);
  EXPECT_DOUBLE_EQ(quantile_sorted(v, 1.0), 4.0);
  EXPECT_NEAR(quantile_sorted(v, 0.99), 3.97, 1e-6);
  EXPECT_DOUBLE_EQ(quantile_sorted(std::vector<float>{1, 2, 9}, 0.5), 2.0);
  EXPECT_EQ(quantile_sorted(std::vector<float>{}, 0.5), 0.0);
  const ValueWithError p = proportion(90, 100);
  EXPECT_DOUBLE_EQ(p.value, 0.9);
  EXPECT_NEAR(p.error, std::sqrt(0.9 * 0.1 / 99), 1e-12);
  EXPECT_EQ(proportion(5, 5).error, 0.0);
}

}  // namespace
}  // namespace pagoda

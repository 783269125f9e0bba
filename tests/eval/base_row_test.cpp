#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "eval/base_row.h"
#include "eval/token_scores.h"

namespace pagoda {
namespace {

std::vector<double> exact_log_probs(const std::vector<float>& logits) {
  double m = logits[0];
  for (float v : logits) m = std::max(m, static_cast<double>(v));
  double s = 0;
  for (float v : logits) s += std::exp(v - m);
  std::vector<double> lp(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) lp[i] = logits[i] - m - std::log(s);
  return lp;
}

// KL(p || q) in double over the tokens the packing keeps (log p > -16).
double exact_kld(const std::vector<float>& base, const std::vector<float>& model) {
  const auto lp = exact_log_probs(base), lq = exact_log_probs(model);
  double k = 0;
  for (size_t i = 0; i < lp.size(); ++i)
    if (lp[i] > kMinLogProb) k += std::exp(lp[i]) * (lp[i] - lq[i]);
  return k;
}

std::vector<float> random_row(size_t n, float spread, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, spread);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

TEST(BaseRow, KldOfADistributionWithItselfIsZero) {
  for (size_t n : {3u, 512u, 262144u}) {
    const auto logits = random_row(n, 3.0f, 7);
    BaseRow row;
    pack_base_row(logits, 1, row);
    const RowComparison c = compare_to_base(row, logits, 1);
    EXPECT_NEAR(c.kld, 0.0, 2e-5) << n;  // the grid's rounding only
    EXPECT_TRUE(c.same_top);
    EXPECT_NEAR(c.nll, row.nll, 1e-5);
  }
}

TEST(BaseRow, KldOfTwoHandComputedDistributions) {
  // p = softmax(0, 1, 2), q = softmax(2, 1, 0): KL(p || q) = sum p (log p - log q), by hand
  // 2 * (p2 - p0) since log p - log q = 2 * (i - 1) per token i.
  const std::vector<float> base = {0, 1, 2}, model = {2, 1, 0};
  const double z = 1 + std::exp(1.0) + std::exp(2.0);
  const double by_hand = 2 * (std::exp(2.0) - 1) / z;
  BaseRow row;
  pack_base_row(base, 0, row);
  EXPECT_FALSE(row.sparse);
  const RowComparison c = compare_to_base(row, model, 0);
  EXPECT_NEAR(c.kld, by_hand, 2e-4);
  EXPECT_FALSE(c.same_top);
  EXPECT_NEAR(c.nll, std::log(z) - 2, 1e-6);
  EXPECT_NEAR(row.nll, std::log(z), 1e-6);
}

TEST(BaseRow, KldMatchesDoublePrecisionOnLargeRows) {
  for (float spread : {1.0f, 4.0f, 9.0f}) {
    const auto base = random_row(50000, spread, 11);
    auto model = base;
    std::mt19937 rng(5);
    std::normal_distribution<float> noise(0.0f, 0.3f);
    for (float& x : model) x += noise(rng);
    BaseRow row;
    pack_base_row(base, 17, row);
    const RowComparison c = compare_to_base(row, model, 17);
    const double want = exact_kld(base, model);
    EXPECT_NEAR(c.kld, want, 2e-4 + 1e-3 * want) << spread;
    EXPECT_GT(c.kld, 0.0);
  }
}

TEST(BaseRow, PackingRoundTripErrorBound) {
  for (float spread : {0.5f, 3.0f, 10.0f, 40.0f}) {
    const auto logits = random_row(262144, spread, 3);
    const auto lp = exact_log_probs(logits);
    BaseRow row;
    pack_base_row(logits, 5, row);
    EXPECT_LE(row.step, 16.0 / kCodeLevels + 1e-6);
    size_t kept = 0;
    for (size_t i = 0; i < lp.size(); ++i) {
      const double got = row.log_prob(static_cast<int32_t>(i));
      if (lp[i] > kMinLogProb + 1e-4) {
        ++kept;
        // half a step of rounding plus float rounding of the log-probabilities
        ASSERT_NEAR(got, lp[i], row.step / 2 + 1e-5) << "spread " << spread << " token " << i;
      } else if (lp[i] < kMinLogProb - 1e-4) {
        ASSERT_TRUE(std::isinf(got)) << i;
      }
    }
    EXPECT_GT(kept, 0u);
    EXPECT_NEAR(row.nll, -lp[5], 1e-4);
    // Wide rows keep few tokens and go sparse; a flat row stays dense.
    EXPECT_EQ(row.sparse, kept * 3 < logits.size()) << spread;
  }
  const std::vector<float> flat(1000, 1.0f);
  BaseRow row;
  pack_base_row(flat, 0, row);
  EXPECT_FALSE(row.sparse);
  EXPECT_LT(row.step, 1e-9f);
  EXPECT_NEAR(row.log_prob(999), -std::log(1000.0), 1e-5);
}

TEST(BaseRow, TopOneTiesGoToTheLowestId) {
  // The base has a tie between 2 and 5: its top token is 2.
  const std::vector<float> base = {0, 1, 4, 0, 0, 4, 1, 0};
  BaseRow row;
  pack_base_row(base, 3, row);
  EXPECT_EQ(row.argmax, 2);
  EXPECT_TRUE(compare_to_base(row, base, 3).same_top);
  // A model tied the same way agrees; one that prefers 5 by a hair does not.
  std::vector<float> model = base;
  model[0] = 2;
  EXPECT_TRUE(compare_to_base(row, model, 3).same_top);
  model[5] = std::nextafter(4.0f, 5.0f);
  EXPECT_FALSE(compare_to_base(row, model, 3).same_top);
}

// A top-k row keeps the k most likely tokens (ties to the lower id) and the rest's mass;
// KL against it is exact when the student's tail is shaped like the teacher's, and equals
// the full KL when k covers every token kept by the full packing.
TEST(BaseRow, TopKRowKeepsTheMostLikelyAndTheTailMass) {
  const std::vector<float> logits = {0.5f, 3.0f, -1.0f, 3.0f, 2.0f, -4.0f, 0.0f, 1.0f};
  BaseRow row;
  pack_top_k_row(logits, 4, 3, row);
  EXPECT_TRUE(row.sparse);
  EXPECT_EQ(row.ids, (std::vector<uint32_t>{1, 3, 4}));
  EXPECT_EQ(row.argmax, 1);
  const auto lp = exact_log_probs(logits);
  EXPECT_NEAR(row.tail, 1.0 - std::exp(lp[1]) - std::exp(lp[3]) - std::exp(lp[4]), 1e-6);
  double h = 0;
  for (double x : lp) h -= std::exp(x) * x;
  EXPECT_NEAR(row.entropy, h, 1e-5);
  EXPECT_NEAR(row.nll, -lp[4], 1e-5);
  for (uint32_t id : row.ids) EXPECT_NEAR(row.log_prob(static_cast<int32_t>(id)), lp[id], 2e-4);
  EXPECT_TRUE(std::isinf(row.log_prob(0)));
  // Against itself: nothing diverges.
  EXPECT_NEAR(compare_to_base(row, logits, 4).kld, 0.0, 1e-4);
  // A student that scales the teacher's tail uniformly: the tail assumption holds exactly.
  std::vector<float> student = logits;
  for (size_t i : {0u, 2u, 5u, 6u, 7u}) student[i] -= 0.7f;
  EXPECT_NEAR(compare_to_base(row, student, 4).kld, exact_kld(logits, student), 5e-4);
}

TEST(BaseRow, TopKOfEveryTokenGivesTheFullKld) {
  const auto base = random_row(300, 2.0f, 11), model = random_row(300, 2.0f, 12);
  BaseRow full, top;
  pack_base_row(base, 7, full);
  pack_top_k_row(base, 7, 300, top);
  EXPECT_NEAR(compare_to_base(top, model, 7).kld, compare_to_base(full, model, 7).kld, 1e-3);
  EXPECT_NEAR(compare_to_base(top, model, 7).kld, exact_kld(base, model), 1e-3);
}

}  // namespace
}  // namespace pagoda

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <vector>

#include "sampling/reference_chain.h"
#include "sampling/sampler.h"

namespace pagoda {
namespace {

// Pearson's chi-square statistic of `n` drawn token counts against `expected`.
double pearson(const std::map<int32_t, int>& counts, const std::map<int32_t, double>& expected, int n) {
  double chi2 = 0;
  for (const auto& [token, prob] : expected) {
    const double e = prob * n;
    const auto it = counts.find(token);
    const double d = (it == counts.end() ? 0 : it->second) - e;
    chi2 += d * d / e;
  }
  return chi2;
}

// The same for `n` draws from the sampler.
double chi_square(Sampler& sampler, const std::vector<float>& logits,
                  const std::map<int32_t, double>& expected, int n) {
  std::map<int32_t, int> counts;
  for (int i = 0; i < n; ++i) {
    std::vector<float> l = logits;
    const int32_t token = sampler.sample(l, {});
    EXPECT_TRUE(expected.count(token)) << "drew filtered token " << token;
    ++counts[token];
  }
  return pearson(counts, expected, n);
}

TEST(Distribution, DefaultChainDrawsMatchThePostFilterSoftmax) {
  // Nine tokens on scrambled ids; top-k drops two, top-p (0.95 of the seven left) would
  // keep six, and min-p = 0.1 (a gap of 2.303 below the best) keeps five.
  const std::vector<float> by_rank = {2.0f, 1.5f, 1.0f, 0.5f, 0.0f, -0.5f, -1.0f, -3.0f, -5.0f};
  const std::vector<int32_t> ids = {4, 0, 7, 2, 8, 1, 5, 3, 6};
  std::vector<float> logits(9);
  for (size_t r = 0; r < ids.size(); ++r) logits[ids[r]] = by_rank[r];
  SamplingParams p;
  p.temperature = 0.7f;
  p.top_k = 7;
  p.top_p = 0.95f;
  p.min_p = 0.1f;
  p.seed = 2024;
  const auto expected = testing::reference_distribution(logits, p);
  ASSERT_EQ(expected.size(), 5u);
  for (int r = 0; r < 5; ++r) EXPECT_TRUE(expected.count(ids[r]));

  Sampler sampler(p);
  std::vector<float> l = logits;
  for (const auto& [token, prob] : sampler.distribution(l, {})) {
    EXPECT_NEAR(prob, expected.at(token), 1e-6);
  }
  // 4 degrees of freedom: a correct sampler exceeds 33.38 with probability 1e-6, so with
  // any seed this fails spuriously one time in a million (and never with this seed).
  const double chi2 = chi_square(sampler, logits, expected, 200000);
  std::printf("chi-square (4 dof) = %.2f\n", chi2);
  EXPECT_LT(chi2, 33.38);
}

TEST(Distribution, WholeVocabularyDrawsMatchTheSoftmax) {
  // Filters off: the draw walks per-block sums over 600 tokens (three blocks).
  std::mt19937 rng(9);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> logits(600);
  for (float& l : logits) l = normal(rng);
  auto p = testing::plain_params(77);
  p.temperature = 1.3f;
  const auto expected = testing::reference_distribution(logits, p);
  ASSERT_EQ(expected.size(), 600u);
  const double min_expected = std::min_element(expected.begin(), expected.end(), [](auto& a,
                                                                                    auto& b) {
                                return a.second < b.second;
                              })->second * 200000;
  ASSERT_GT(min_expected, 5.0);  // chi-square's approximation needs >= 5 per cell
  Sampler sampler(p);
  // 599 degrees of freedom: the 1 - 1e-6 quantile is 778.15.
  const double chi2 = chi_square(sampler, logits, expected, 200000);
  std::printf("chi-square (599 dof) = %.2f\n", chi2);
  EXPECT_LT(chi2, 778.15);
}

TEST(Temperature, ScalesTheLogitsOfTwoTokens) {
  // Logits 0 and 1: P(token 1) = 1 / (1 + e^(-1/T)).
  for (float temp : {0.25f, 0.5f, 1.0f, 2.0f, 10.0f}) {
    auto p = testing::plain_params();
    p.temperature = temp;
    std::vector<float> logits = {0.0f, 1.0f};
    const auto dist = Sampler(p).distribution(logits, {});
    ASSERT_EQ(dist.size(), 2u);
    const double want = 1.0 / (1.0 + std::exp(-1.0 / temp));
    for (const auto& [token, prob] : dist) {
      EXPECT_NEAR(prob, token == 1 ? want : 1.0 - want, 1e-6) << "T=" << temp;
    }
  }
  // Lower temperature sharpens: at T = 0.5 token 1 has e^2 / (1 + e^2) = 0.881.
  auto p = testing::plain_params(3);
  p.temperature = 0.5f;
  Sampler sampler(p);
  int ones = 0;
  for (int i = 0; i < 20000; ++i) {
    std::vector<float> logits = {0.0f, 1.0f};
    ones += sampler.sample(logits, {});
  }
  EXPECT_NEAR(ones / 20000.0, 0.8808, 0.01);  // 4.4 standard deviations
}

}  // namespace
}  // namespace pagoda

namespace pagoda {
namespace {

// Speculative decoding's verification (Sampler::sample_draft): whatever the draft, the
// token it returns is distributed as sample()'s, the target's distribution after the
// whole chain. 100,000 draws per draft, Pearson's chi-square against distribution(), at
// p = 0.01. A verification that skips the residual (on rejection, drawing from the full
// distribution again, so the draft comes out too often) must fail the same test.
TEST(SpeculativeVerification, DraftsDoNotChangeTheDistribution) {
  const std::vector<float> logits = {1.2f, 0.3f, -0.4f, 2.0f, 0.9f, -1.5f, 0.0f, 1.6f};
  SamplingParams p;
  p.temperature = 0.9f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.seed = 11;
  const double critical = 18.475;  // chi-square, 7 degrees of freedom, p = 0.01
  constexpr int kDraws = 100000;
  std::map<int32_t, double> expected;
  {
    Sampler s(p);
    std::vector<float> l = logits;
    for (const auto& [tok, prob] : s.distribution(l, {})) expected[tok] = prob;
  }
  ASSERT_EQ(expected.size(), 8u);
  // The likeliest token, a middling one, an unlikely one.
  for (int32_t draft : {3, 4, 5}) {
    Sampler s(p);
    Sampler mutant(p);
    SamplerScratch scratch;
    std::map<int32_t, int> counts, mutant_counts;
    int kept = 0;
    for (int i = 0; i < kDraws; ++i) {
      std::vector<float> l = logits;
      bool accepted = false;
      const int32_t tok = s.sample_draft(l, {}, draft, scratch, &accepted);
      ASSERT_EQ(accepted, tok == draft);
      ++counts[tok];
      kept += accepted;
      // The mutant: a rejected draft is followed by a plain draw that may pick it again.
      std::vector<float> m = logits;
      bool m_accepted = false;
      int32_t m_tok = mutant.sample_draft(m, {}, draft, scratch, &m_accepted);
      if (!m_accepted) {
        std::vector<float> again = logits;
        m_tok = mutant.sample(again, {}, scratch);
      }
      ++mutant_counts[m_tok];
    }
    const double chi2 = pearson(counts, expected, kDraws), mutant_chi2 = pearson(mutant_counts, expected, kDraws);
    std::printf("draft %d: kept %.3f (p %.3f), chi-square %.2f, without the residual %.1f\n", draft,
                static_cast<double>(kept) / kDraws, expected[draft], chi2, mutant_chi2);
    EXPECT_LT(chi2, critical) << "draft " << draft;
    EXPECT_NEAR(static_cast<double>(kept) / kDraws, expected[draft], 0.01) << "draft " << draft;
    EXPECT_GT(mutant_chi2, critical) << "draft " << draft << ": the test cannot tell a wrong verification";
  }
  // Greedy: the draft is kept exactly when it is the argmax.
  SamplingParams g = p;
  g.temperature = 0.0f;
  Sampler greedy(g);
  SamplerScratch scratch;
  for (int32_t draft : {3, 4}) {
    std::vector<float> l = logits;
    bool accepted = false;
    EXPECT_EQ(greedy.sample_draft(l, {}, draft, scratch, &accepted), 3);
    EXPECT_EQ(accepted, draft == 3);
  }
}

}  // namespace
}  // namespace pagoda

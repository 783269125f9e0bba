#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>
#include <vector>

#include "sampling/reference_chain.h"
#include "sampling/sampler.h"

namespace pagoda {
namespace {

using testing::plain_params;

std::set<int32_t> survivors(const SamplingParams& p, std::vector<float> logits) {
  std::set<int32_t> ids;
  for (const auto& [id, prob] : Sampler(p).distribution(logits, {})) ids.insert(id);
  return ids;
}

TEST(TopK, KeepsTheKBest) {
  auto p = plain_params();
  p.top_k = 3;
  EXPECT_EQ(survivors(p, {0.5f, 3.0f, 1.0f, 3.0f, -1.0f, 2.0f}), (std::set<int32_t>{1, 3, 5}));
}

TEST(TopK, TiesAtTheCutGoToLowestIds) {
  auto p = plain_params();
  p.top_k = 2;
  EXPECT_EQ(survivors(p, {1.0f, 2.0f, 2.0f, 2.0f}), (std::set<int32_t>{1, 2}));
  p.top_k = 1;
  EXPECT_EQ(survivors(p, {2.0f, 5.0f, 5.0f}), (std::set<int32_t>{1}));
}

TEST(TopK, NeverKeepsMaskedTokensAndOffWhenKCoversTheVocab) {
  const float inf = std::numeric_limits<float>::infinity();
  auto p = plain_params();
  p.top_k = 2;
  EXPECT_EQ(survivors(p, {-inf, 1.0f, -inf}), (std::set<int32_t>{1}));
  p.top_k = 4;
  EXPECT_EQ(survivors(p, {0.0f, 1.0f, 2.0f, 3.0f}), (std::set<int32_t>{0, 1, 2, 3}));
  p.top_k = 100;
  EXPECT_EQ(survivors(p, {0.0f, -inf, 2.0f}), (std::set<int32_t>{0, 2}));
}

TEST(TopK, MatchesAFullSortOnLargeVocabularies) {
  // Small integer logits force many ties, and k well below the vocabulary makes the
  // running bar compact its buffer many times.
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> level(-50, 50);
  std::vector<float> logits(20000);
  for (float& l : logits) l = static_cast<float>(level(rng));
  for (int k : {1, 7, 40, 300, 5000, 19999}) {
    auto p = plain_params();
    p.top_k = k;
    std::set<int32_t> want;
    for (const auto& [id, prob] : testing::reference_distribution(logits, p)) want.insert(id);
    ASSERT_EQ(want.size(), static_cast<size_t>(k));
    EXPECT_EQ(survivors(p, logits), want) << "k=" << k;
  }
}

// Probabilities 1/2, 1/4, 1/8, 1/8 on scrambled ids; the two 1/8 tie (ids 0 and 3).
std::vector<float> halving() {
  return {std::log(0.125f), std::log(0.25f), std::log(0.5f), std::log(0.125f)};
}

TEST(TopP, KeepsTheSmallestSetReachingP) {
  auto p = plain_params();
  const std::vector<std::pair<float, std::set<int32_t>>> cases = {
      {0.0f, {2}},          // at least one token
      {0.49f, {2}},         // just below the first token's mass
      {0.51f, {2, 1}},      // just above it
      {0.74f, {2, 1}},      // 0.75 reached with two
      {0.76f, {2, 1, 0}},   // the third is the tied 1/8 with the lower id
      {0.874f, {2, 1, 0}},  // 0.875 reached with three
      {0.9f, {2, 1, 0, 3}},
      {0.9999f, {2, 1, 0, 3}},
  };
  for (const auto& [top_p, want] : cases) {
    p.top_p = top_p;
    EXPECT_EQ(survivors(p, halving()), want) << "top_p=" << top_p;
  }
}

TEST(TopP, RenormalizesAfterTopK) {
  // Probabilities 0.4, 0.3, 0.2, 0.1. After top-k = 2 the best has 4/7 = 0.571 of the
  // remaining mass, enough for p = 0.55 alone; over the full vocabulary it is not.
  const std::vector<float> logits = {std::log(0.4f), std::log(0.3f), std::log(0.2f),
                                     std::log(0.1f)};
  auto p = plain_params();
  p.top_p = 0.55f;
  EXPECT_EQ(survivors(p, logits), (std::set<int32_t>{0, 1}));
  p.top_k = 2;
  EXPECT_EQ(survivors(p, logits), (std::set<int32_t>{0}));
}

TEST(TopP, WholeVocabularyNucleusWithManySmallTokens) {
  // Two strong tokens hold about 75% of the mass; 9998 weak ones share the rest. The
  // nucleus bound must neither drop strong tokens nor keep more weak ones than needed.
  std::vector<float> logits(10000, 0.0f);
  logits[5] = 10.0f;
  logits[9000] = 9.0f;
  auto p = plain_params();
  p.top_p = 0.7f;
  EXPECT_EQ(survivors(p, logits), (std::set<int32_t>{5, 9000}));
  p.top_p = 0.76f;
  std::set<int32_t> want;
  for (const auto& [id, prob] : testing::reference_distribution(logits, p)) want.insert(id);
  EXPECT_GT(want.size(), 300u);
  EXPECT_EQ(survivors(p, logits), want);
}

TEST(MinP, DropsTokensBelowAFractionOfTheBest) {
  // Probabilities relative to the best: 1, 0.5, 0.1, 0.05, 0.2.
  const std::vector<float> logits = {0.0f, std::log(0.5f), std::log(0.1f), std::log(0.05f),
                                     std::log(0.2f)};
  for (int top_k : {0, 4}) {  // without top-k, and through the top-k path
    auto p = plain_params();
    p.top_k = top_k;
    p.min_p = 0.099f;
    EXPECT_EQ(survivors(p, logits), (std::set<int32_t>{0, 1, 2, 4})) << "top_k=" << top_k;
    p.min_p = 0.11f;
    EXPECT_EQ(survivors(p, logits), (std::set<int32_t>{0, 1, 4})) << "top_k=" << top_k;
    p.min_p = 0.6f;
    EXPECT_EQ(survivors(p, logits), (std::set<int32_t>{0})) << "top_k=" << top_k;
    p.min_p = 1.5f;  // asks for more than the best has: the best alone stays
    EXPECT_EQ(survivors(p, logits), (std::set<int32_t>{0})) << "top_k=" << top_k;
  }
}

TEST(TopP, WithMinPOnAFlatVocabulary) {
  // 30 copies of 1000 evenly spaced levels: top-p alone keeps most of the vocabulary,
  // and more tokens clear min-p's floor than the chain sorts directly, so both go
  // through the histogram. The tokens within log(10) of the best (17280 of them) hold
  // 91.7% of the mass: min-p = 0.1 binds under top-p = 0.95 and top-p binds at 0.9.
  std::vector<float> logits(30000);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = static_cast<float>(i % 1000) / 250.0f;
  for (float min_p : {0.0f, 0.1f}) {
    for (float top_p : {0.9f, 0.95f}) {
      auto p = plain_params();
      p.top_p = top_p;
      p.min_p = min_p;
      std::set<int32_t> want;
      for (const auto& [id, prob] : testing::reference_distribution(logits, p)) want.insert(id);
      if (min_p > 0 && top_p > 0.92f) {
        EXPECT_EQ(want.size(), 17280u);
      }
      if (top_p < 0.92f) {
        EXPECT_LT(want.size(), 17280u);
      }
      EXPECT_EQ(survivors(p, logits), want) << "top_p=" << top_p << " min_p=" << min_p;
    }
  }
}

TEST(Chain, MaskedTokensNeverSurvive) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> logits(5000, 0.0f);
  for (size_t i = 0; i < logits.size(); i += 3) logits[i] = -inf;
  for (float top_p : {0.5f, 1.0f}) {
    for (float min_p : {0.0f, 0.5f}) {
      auto p = plain_params();
      p.top_p = top_p;
      p.min_p = min_p;
      for (int32_t id : survivors(p, logits)) ASSERT_NE(id % 3, 0) << id;
      Sampler s(p);
      for (int i = 0; i < 2000; ++i) {
        std::vector<float> l = logits;
        ASSERT_NE(s.sample(l, {}) % 3, 0);
      }
    }
  }
}

TEST(Chain, MatchesTheReferenceOnRandomLogits) {
  // Every combination of filters, on vocabularies that exercise both the short-list and
  // the whole-vocabulary paths, against the plain sort-everything reference.
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 2.5f);
  int cases = 0;
  // The widest vocabulary is flat enough that min-p's floor keeps more than the
  // chain's sort limit, sending min-p + top-p through the histogram as well.
  for (size_t n_vocab : {1u, 5u, 300u, 4099u, 20000u}) {
    for (int top_k : {0, 1, 3, 40}) {
      for (float top_p : {0.3f, 0.9f, 1.0f}) {
        for (float min_p : {0.0f, 0.02f, 0.3f}) {
          for (float temp : {0.5f, 1.0f, 1.7f}) {
            std::vector<float> logits(n_vocab);
            for (float& l : logits) l = normal(rng) * (n_vocab > 10000 ? 0.4f : 1.0f);
            auto p = plain_params();
            p.top_k = top_k;
            p.top_p = top_p;
            p.min_p = min_p;
            p.temperature = temp;
            const auto want = testing::reference_distribution(logits, p);
            const auto got = Sampler(p).distribution(logits, {});
            ASSERT_EQ(got.size(), want.size())
                << "V=" << n_vocab << " k=" << top_k << " p=" << top_p << " min_p=" << min_p;
            for (const auto& [id, prob] : got) {
              ASSERT_TRUE(want.count(id)) << "unexpected token " << id;
              EXPECT_NEAR(prob, want.at(id), 1e-5);
            }
            ++cases;
          }
        }
      }
    }
  }
  EXPECT_EQ(cases, 540);
}

}  // namespace
}  // namespace pagoda

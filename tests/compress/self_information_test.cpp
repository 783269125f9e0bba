#include "compress/self_information.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numeric>
#include <algorithm>
#include <vector>

#include "random_model_file.h"

namespace pagoda {
namespace {

class SelfInformationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    RandomModelSpec s;
    s.arch = "llama";
    s.vocab = 512;
    loaded_ = testing_util::load_random_model(s, "compress_tiny", pool_);
    ASSERT_NE(loaded_.model, nullptr);
    model_ = loaded_.model.get();
  }

  // -log softmax(row)[target] for every position from one forward with all logits,
  // computed here in long double with no shared code.
  std::vector<double> reference(const std::vector<int32_t>& tokens) {
    const int32_t V = model_->config().n_vocab;
    KvCache kv = model_->make_cache(static_cast<int32_t>(tokens.size()));
    std::vector<float> logits(tokens.size() * static_cast<size_t>(V));
    EXPECT_TRUE(model_->forward(tokens, 0, kv, logits.data(), true).is_ok());
    std::vector<double> out(tokens.size(), std::numeric_limits<double>::infinity());
    for (size_t p = 0; p + 1 < tokens.size(); ++p) {
      const float* row = logits.data() + p * V;
      long double mx = row[0];
      for (int32_t i = 1; i < V; ++i) mx = std::max<long double>(mx, row[i]);
      long double sum = 0;
      for (int32_t i = 0; i < V; ++i) sum += std::exp(static_cast<long double>(row[i]) - mx);
      out[p + 1] = static_cast<double>(mx + std::log(sum) - row[tokens[p + 1]]);
    }
    return out;
  }

  ThreadPool pool_{2};
  testing_util::RandomModelFile loaded_;
  Model* model_ = nullptr;
};

std::vector<int32_t> sample_tokens(size_t n) {
  std::vector<int32_t> t;
  for (size_t i = 0; i < n; ++i) t.push_back(static_cast<int32_t>(3 + (i * 37 + i * i * 11) % 500));
  return t;
}

TEST_F(SelfInformationTest, EqualsNegativeLogSoftmaxOfFullLogits) {
  const auto tokens = sample_tokens(70);
  const auto want = reference(tokens);
  // One row of logits per piece, a few rows, and all at once: the same numbers.
  const size_t row = static_cast<size_t>(model_->config().n_vocab) * sizeof(float);
  for (size_t budget : {row, 3 * row, 1000 * row}) {
    auto got = self_information(*model_, tokens, budget);
    ASSERT_TRUE(got.is_ok()) << got.status().message();
    ASSERT_EQ(got->size(), tokens.size());
    EXPECT_TRUE(std::isinf((*got)[0]));
    // Pieces of one or three rows run other kernels (GEMV, smaller tiles) than one pass
    // over all 70, and a last-bit difference can round a stored K/V value to the other
    // neighbouring FP16 (2^-11 relative), moving an NLL by about 1e-4; a wrong row or
    // target moves it by whole nats. All at once it is the reference's own forward.
    const double tol = budget == 1000 * row ? 1e-5 : 2e-3;
    for (size_t i = 1; i < tokens.size(); ++i) EXPECT_NEAR((*got)[i], want[i], tol) << "token " << i;
  }
}

TEST_F(SelfInformationTest, ScoresContinueTheSequenceAndTruncateRewinds) {
  const auto tokens = sample_tokens(40);
  auto s = ScorerSession::create(*model_, 64, 4 * model_->config().n_vocab * sizeof(float));
  ASSERT_TRUE(s.is_ok());
  // A prefix appended unscored, then scored pieces: each token given all before it.
  ASSERT_TRUE(s->append(std::span<const int32_t>(tokens).first(10)).is_ok());
  auto a = s->score(std::span<const int32_t>(tokens).subspan(10, 15));
  ASSERT_TRUE(a.is_ok());
  auto b = s->score(std::span<const int32_t>(tokens).subspan(25));
  ASSERT_TRUE(b.is_ok());
  const auto want = reference(tokens);
  for (size_t i = 0; i < 15; ++i) EXPECT_NEAR((*a)[i], want[10 + i], 1e-4);
  for (size_t i = 0; i < 15; ++i) EXPECT_NEAR((*b)[i], want[25 + i], 1e-4);
  // Rewind to 10 tokens and go on with other text: scored as if the first never was.
  s->truncate(10);
  std::vector<int32_t> other(tokens.begin(), tokens.begin() + 10);
  const std::vector<int32_t> tail = {7, 8, 9, 100, 200, 300};
  auto c = s->score(tail);
  ASSERT_TRUE(c.is_ok());
  other.insert(other.end(), tail.begin(), tail.end());
  const auto want2 = reference(other);
  for (size_t i = 0; i < tail.size(); ++i) EXPECT_NEAR((*c)[i], want2[10 + i], 1e-4);
  // Rewind again and append (unscored) before scoring: the appended tokens must replace
  // what the cache held at their positions.
  s->truncate(10);
  std::vector<int32_t> third(tokens.begin(), tokens.begin() + 10);
  const std::vector<int32_t> ctx = {50, 60, 70}, more = {80, 90, 110, 120};
  ASSERT_TRUE(s->append(ctx).is_ok());
  auto d = s->score(more);
  ASSERT_TRUE(d.is_ok());
  third.insert(third.end(), ctx.begin(), ctx.end());
  third.insert(third.end(), more.begin(), more.end());
  const auto want3 = reference(third);
  for (size_t i = 0; i < more.size(); ++i) EXPECT_NEAR((*d)[i], want3[13 + i], 1e-4);
}

TEST_F(SelfInformationTest, RefusesWhatDoesNotFit) {
  auto s = ScorerSession::create(*model_, 8);
  ASSERT_TRUE(s.is_ok());
  EXPECT_FALSE(s->score(sample_tokens(9)).is_ok());
  const std::vector<int32_t> bad = {1, 99999};
  EXPECT_FALSE(s->score(bad).is_ok());
  EXPECT_FALSE(ScorerSession::create(*model_, model_->config().n_ctx_train + 1).is_ok());
}

}  // namespace
}  // namespace pagoda

namespace pagoda {
namespace {

class SubsetScoresTest : public SelfInformationTest {
 protected:
  std::shared_ptr<const OutputSubset> head(const std::vector<int32_t>& ids) {
    auto s = OutputSubset::make(*model_, ids);
    EXPECT_TRUE(s.is_ok()) << s.status().message();
    return std::make_shared<const OutputSubset>(std::move(*s));
  }

  // -log of each token's probability renormalized over `subset`, and each row's share of
  // the probability the subset holds, from the full logits in long double.
  void reference_over(const std::vector<int32_t>& tokens, const std::vector<int32_t>& subset,
                      std::vector<double>& scores, std::vector<double>& share) {
    const int32_t V = model_->config().n_vocab;
    KvCache kv = model_->make_cache(static_cast<int32_t>(tokens.size()));
    std::vector<float> logits(tokens.size() * static_cast<size_t>(V));
    ASSERT_TRUE(model_->forward(tokens, 0, kv, logits.data(), true).is_ok());
    scores.assign(tokens.size(), std::numeric_limits<double>::infinity());
    share.assign(tokens.size(), 0.0);
    for (size_t p = 0; p + 1 < tokens.size(); ++p) {
      const float* row = logits.data() + p * V;
      long double all = 0, in = 0;
      for (int32_t i = 0; i < V; ++i) all += std::exp(static_cast<long double>(row[i]));
      for (int32_t id : subset) in += std::exp(static_cast<long double>(row[id]));
      scores[p + 1] = static_cast<double>(std::log(in) - row[tokens[p + 1]]);
      share[p + 1] = static_cast<double>(in / all);
    }
  }
};

TEST_F(SubsetScoresTest, RenormalizeOverTheSubsetAndMeasureItsShareOnEvery32ndRow) {
  const auto tokens = sample_tokens(70);
  // 100 low ids (the first token of the sample is among them) plus the tokens scored.
  std::vector<int32_t> frequent(100);
  std::iota(frequent.begin(), frequent.end(), 0);
  std::vector<int32_t> subset = frequent;
  for (int32_t t : tokens)
    if (std::find(subset.begin(), subset.end(), t) == subset.end()) subset.push_back(t);
  std::vector<double> want, share;
  reference_over(tokens, subset, want, share);
  const size_t row = static_cast<size_t>(model_->config().n_vocab) * sizeof(float);
  auto s = ScorerSession::create(*model_, 70, 3 * row);
  ASSERT_TRUE(s.is_ok());
  s->use_subset(head(frequent), /*min_mass=*/0.0);
  auto got = s->score(tokens);
  ASSERT_TRUE(got.is_ok()) << got.status().message();
  EXPECT_TRUE(s->subset_in_use());
  EXPECT_EQ(s->subset_size(), static_cast<int64_t>(subset.size()));
  EXPECT_TRUE(std::isinf((*got)[0]));
  // Pieces of the narrower rows the budget holds: other piece sizes than the reference's
  // single pass (see the tolerance above).
  for (size_t i = 1; i < tokens.size(); ++i) EXPECT_NEAR((*got)[i], want[i], 2e-3) << "token " << i;
  // Rows 15 and 47 of the 69 (predicting tokens 16 and 48) also went through the whole head.
  EXPECT_NEAR(s->subset_mass(), (share[16] + share[48]) / 2, 1e-4);
  EXPECT_LT(s->subset_mass(), 1.0);
}

TEST_F(SubsetScoresTest, StaysExactWhenTheSubsetHoldsTooLittle) {
  const auto tokens = sample_tokens(40);
  const auto exact = reference(tokens);
  std::vector<int32_t> frequent(50);
  std::iota(frequent.begin(), frequent.end(), 0);
  auto s = ScorerSession::create(*model_, 40, 3 * model_->config().n_vocab * sizeof(float));
  ASSERT_TRUE(s.is_ok());
  s->use_subset(head(frequent), /*min_mass=*/0.999);
  auto got = s->score(tokens);
  ASSERT_TRUE(got.is_ok()) << got.status().message();
  EXPECT_FALSE(s->subset_in_use());
  EXPECT_LT(s->subset_mass(), 0.999);
  for (size_t i = 1; i < tokens.size(); ++i) EXPECT_NEAR((*got)[i], exact[i], 2e-3) << "token " << i;
}

TEST_F(SubsetScoresTest, TokensScoredLaterJoinTheSubset) {
  const auto tokens = sample_tokens(30);
  auto s = ScorerSession::create(*model_, 40, 3 * model_->config().n_vocab * sizeof(float));
  ASSERT_TRUE(s.is_ok());
  s->use_subset(head({0, 1, 2, 3}), 0.0);
  ASSERT_TRUE(s->score(std::span<const int32_t>(tokens).first(10)).is_ok());
  const int64_t before = s->subset_size();
  const std::vector<int32_t> fresh = {511, 510, 509};
  auto got = s->score(fresh);
  ASSERT_TRUE(got.is_ok()) << got.status().message();
  EXPECT_EQ(s->subset_size(), before + 3);
  for (float x : *got) EXPECT_TRUE(std::isfinite(x) && x >= 0.0f);
}

}  // namespace
}  // namespace pagoda

#include "compress/self_information.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <vector>

#include "gguf/gguf_file.h"
#include "model/random_model.h"

namespace pagoda {
namespace {

class SelfInformationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (std::filesystem::temp_directory_path() / "pagoda_compress_tiny.gguf").string();
    RandomModelSpec s;
    s.arch = "llama";
    s.vocab = 512;
    ASSERT_TRUE(write_random_model(s, path_).is_ok());
    auto f = GgufFile::open(path_);
    ASSERT_TRUE(f.is_ok()) << f.status().message();
    file_ = std::make_unique<GgufFile>(std::move(f.value()));
    auto m = Model::load(*file_, pool_);
    ASSERT_TRUE(m.is_ok()) << m.status().message();
    model_ = std::move(m.value());
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

  std::string path_;
  ThreadPool pool_{2};
  std::unique_ptr<GgufFile> file_;
  std::unique_ptr<Model> model_;
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

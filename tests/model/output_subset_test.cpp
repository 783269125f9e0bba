// An output head over a subset of the vocabulary (model/output_subset.h): over the hidden
// states of Model::forward_hidden, each row of its logits is the full head's logits at
// the subset's ids, in the subset's order, for a row-major head and for one packed into
// panels; what cannot be a subset is refused.
#include "model/output_subset.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "kernels/matmul/packed_weights.h"
#include "model/model.h"
#include "random_model_file.h"

namespace pagoda {
namespace {

class OutputSubsetTest : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    RandomModelSpec s;
    s.type = GetParam();
    s.dim = 128;
    s.ff = 256;
    s.vocab = 1000;
    loaded_ = testing_util::load_random_model(s, "output_subset_" + std::string(dtype_name(GetParam())), pool_);
    ASSERT_NE(loaded_.model, nullptr);
    model_ = loaded_.model.get();
  }

  ThreadPool pool_{2};
  testing_util::RandomModelFile loaded_;
  Model* model_ = nullptr;
};

TEST_P(OutputSubsetTest, RowsAreTheFullLogitsAtTheSubsetsIds) {
  const int32_t V = model_->config().n_vocab;
  // Out of order, spread over the vocabulary, 37 of them: the last panel is partial.
  std::vector<int32_t> ids;
  for (int32_t i = 0; i < 37; ++i) ids.push_back((i * 271 + 5) % V);
  auto subset = OutputSubset::make(*model_, ids);
  ASSERT_TRUE(subset.is_ok()) << subset.status().message();
  EXPECT_EQ(subset->size(), 37);
  EXPECT_EQ(subset->view().packed != nullptr, model_->weights().output.packed != nullptr);
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(subset->column(ids[i]), static_cast<int32_t>(i));
  EXPECT_EQ(subset->column(1), -1);
  EXPECT_EQ(subset->column(V), -1);

  std::vector<int32_t> tokens(40);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>((i * 97 + 3) % V);
  const int64_t E = model_->config().n_embd;
  std::vector<float> full(tokens.size() * static_cast<size_t>(V)), hidden(tokens.size() * static_cast<size_t>(E));
  KvCache a = model_->make_cache(64), b = model_->make_cache(64);
  ASSERT_TRUE(model_->forward(tokens, 0, a, full.data(), /*all_logits=*/true).is_ok());
  ASSERT_TRUE(model_->forward_hidden(tokens, 0, b, hidden.data()).is_ok());
  // The whole head over the hidden states is the forward's logits, and each subset logit
  // is its row's dot product with the same activations, whichever rows stand beside it:
  // the same bits.
  std::vector<float> again(full.size()), part(tokens.size() * ids.size());
  model_->head_logits(model_->weights().output, hidden.data(), static_cast<int64_t>(tokens.size()), again.data());
  EXPECT_EQ(again, full);
  model_->head_logits(subset->view(), hidden.data(), static_cast<int64_t>(tokens.size()), part.data());
  for (size_t r = 0; r < tokens.size(); ++r)
    for (size_t i = 0; i < ids.size(); ++i)
      ASSERT_EQ(part[r * ids.size() + i], full[r * static_cast<size_t>(V) + static_cast<size_t>(ids[i])])
          << "row " << r << " id " << ids[i];
  // One row alone (a GEMV, not the tile above): compared with the whole head's GEMV.
  std::vector<float> one(ids.size()), whole(static_cast<size_t>(V));
  const float* last = hidden.data() + (tokens.size() - 1) * static_cast<size_t>(E);
  model_->head_logits(subset->view(), last, 1, one.data());
  model_->head_logits(model_->weights().output, last, 1, whole.data());
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(one[i], whole[static_cast<size_t>(ids[i])]);
}

TEST_P(OutputSubsetTest, HiddenStatesNeedAnOutput) {
  KvCache kv = model_->make_cache(8);
  const std::vector<int32_t> tokens = {1, 2, 3};
  EXPECT_FALSE(model_->forward_hidden(tokens, 0, kv, nullptr).is_ok());
}

TEST_P(OutputSubsetTest, RefusesWhatIsNoSubset) {
  const int32_t V = model_->config().n_vocab;
  EXPECT_FALSE(OutputSubset::make(*model_, std::vector<int32_t>{}).is_ok());
  EXPECT_FALSE(OutputSubset::make(*model_, std::vector<int32_t>{1, 2, 1}).is_ok());
  EXPECT_FALSE(OutputSubset::make(*model_, std::vector<int32_t>{0, V}).is_ok());
  EXPECT_FALSE(OutputSubset::make(*model_, std::vector<int32_t>{-1}).is_ok());
  std::vector<int32_t> all(static_cast<size_t>(V));
  std::iota(all.begin(), all.end(), 0);
  EXPECT_TRUE(OutputSubset::make(*model_, all).is_ok());
}

INSTANTIATE_TEST_SUITE_P(Heads, OutputSubsetTest, ::testing::Values(DType::F32, DType::Q8_0, DType::Q4_0),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace pagoda

// Rank pooling through the engine: a random BERT cross-encoder's score is its
// classification head applied to the [CLS] state (checked against that state computed as
// a CLS embedding and the head's weights read back), a text pair's second segment changes
// the result, pairs batched together score as each alone, and what cannot be ranked is
// refused by field.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/engine.h"
#include "engine_test_util.h"
#include "kernels/matmul/matmul.h"

namespace pagoda {
namespace {

using testing_util::greedy;
using testing_util::load_tiny;
using testing_util::TinyModel;
using testing_util::embeddings;
using testing_util::prompt_of;

TinyModel tiny_reranker(ThreadPool& pool, const std::string& name, int32_t outputs = 1) {
  RandomModelSpec s;
  s.arch = "bert";
  s.kv_heads = s.heads;
  s.ctx = 128;
  s.classifier_outputs = outputs;
  return load_tiny(pool, name, s);
}

RequestParams pair_params(Pooling p, int32_t segment_b) {
  RequestParams r;
  r.embed = true;
  r.pooling = p;
  r.segment_b = segment_b;
  return r;
}

std::vector<float> run_alone(const TinyModel& m, const std::vector<int32_t>& prompt, const RequestParams& p) {
  auto e = Engine::create(*m.model, m.tok.get(), EngineConfig{});
  EXPECT_TRUE(e.is_ok()) << e.status().message();
  auto id = (*e)->add_request(prompt, p);
  EXPECT_TRUE(id.is_ok()) << id.status().message();
  return embeddings(**e)[*id];
}

// W x + b of one row, in double.
std::vector<double> affine(const WeightView& w, const float* b, const std::vector<double>& x) {
  std::vector<float> row(static_cast<size_t>(w.cols));
  std::vector<double> y(static_cast<size_t>(w.rows));
  for (int64_t r = 0; r < w.rows; ++r) {
    dequantize_weight_row(w, r, row.data());
    double dot = b != nullptr ? b[r] : 0.0;
    for (int64_t i = 0; i < w.cols; ++i) dot += static_cast<double>(row[i]) * x[i];
    y[r] = dot;
  }
  return y;
}

TEST(Rerank, ScoreIsTheClassificationHeadOfTheFirstState) {
  ThreadPool pool(2);
  const TinyModel m = tiny_reranker(pool, "rerank_head", 3);
  const std::vector<int32_t> prompt = prompt_of(17);
  const std::vector<float> h = run_alone(m, prompt, pair_params(Pooling::kCls, 6));
  const std::vector<float> got = run_alone(m, prompt, pair_params(Pooling::kRank, 6));
  const ModelWeights& w = m.model->weights();
  std::vector<double> x(h.begin(), h.end());
  std::vector<double> pooled = affine(w.cls, w.cls_b, x);
  for (double& v : pooled) v = std::tanh(v);
  const std::vector<double> want = affine(w.cls_out, w.cls_out_b, pooled);
  ASSERT_EQ(got.size(), 3u) << "one value per output of the head, not a hidden-state row";
  double scale = 0;
  for (double v : want) scale = std::max(scale, std::fabs(v));
  ASSERT_GT(scale, 0.1);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5 * scale) << "output " << i;
  // Without the pooler's tanh the scores would differ by far more than the tolerance.
  const std::vector<double> linear = affine(w.cls_out, w.cls_out_b, affine(w.cls, w.cls_b, x));
  double gap = 0;
  for (size_t i = 0; i < want.size(); ++i) gap = std::max(gap, std::fabs(linear[i] - want[i]));
  EXPECT_GT(gap, 100 * 1e-5 * scale);
}

TEST(Rerank, TheSecondSegmentIsTokenTypeOne) {
  ThreadPool pool(2);
  const TinyModel m = tiny_reranker(pool, "rerank_types");
  const std::vector<int32_t> prompt = prompt_of(20);
  const std::vector<float> one_text = run_alone(m, prompt, pair_params(Pooling::kRank, 0));
  const std::vector<float> pair = run_alone(m, prompt, pair_params(Pooling::kRank, 9));
  const std::vector<float> later = run_alone(m, prompt, pair_params(Pooling::kRank, 10));
  ASSERT_EQ(pair.size(), 1u);
  EXPECT_GT(std::fabs(pair[0] - one_text[0]), 1e-3f);
  // Moving the boundary by one token moves the score: each token's type is its own.
  EXPECT_GT(std::fabs(pair[0] - later[0]), 1e-4f);
  // The last token is type 1 when the second text starts there.
  EXPECT_GT(std::fabs(run_alone(m, prompt, pair_params(Pooling::kRank, 19))[0] - one_text[0]), 1e-5f);
}

TEST(Rerank, PairsBatchedWithEmbeddingsScoreAsEachAlone) {
  ThreadPool pool(2);
  const TinyModel m = tiny_reranker(pool, "rerank_batched");
  EngineConfig c;
  c.scheduler.max_num_batched_tokens = 64;
  auto e = Engine::create(*m.model, m.tok.get(), c);
  ASSERT_TRUE(e.is_ok());
  std::map<RequestId, std::pair<std::vector<int32_t>, RequestParams>> asked;
  for (int32_t i = 0; i < 12; ++i) {
    const std::vector<int32_t> prompt = prompt_of(8 + 3 * i, i);
    const RequestParams p = i % 4 == 3 ? pair_params(Pooling::kMean, 0) : pair_params(Pooling::kRank, 2 + i % 5);
    auto id = (*e)->add_request(prompt, p);
    ASSERT_TRUE(id.is_ok()) << id.status().message();
    asked[*id] = {prompt, p};
  }
  const auto got = embeddings(**e);
  ASSERT_EQ(got.size(), asked.size());
  for (const auto& [id, what] : asked) {
    const std::vector<float> alone = run_alone(m, what.first, what.second);
    ASSERT_EQ(got.at(id).size(), alone.size());
    for (size_t i = 0; i < alone.size(); ++i) EXPECT_NEAR(got.at(id)[i], alone[i], 1e-5f);
  }
  EXPECT_EQ((*e)->stats().used_blocks, 0);
}

TEST(Rerank, WhatCannotBeRankedIsRefusedByField) {
  ThreadPool pool(2);
  const TinyModel ranker = tiny_reranker(pool, "rerank_refuse");
  RandomModelSpec plain;
  plain.arch = "bert";
  plain.kv_heads = plain.heads;
  plain.ctx = 128;
  const TinyModel encoder = load_tiny(pool, "rerank_refuse_plain", plain);
  auto field = [](const TinyModel& m, const std::vector<int32_t>& p, const RequestParams& r, std::string* msg) {
    auto e = Engine::create(*m.model, m.tok.get(), EngineConfig{});
    EXPECT_TRUE(e.is_ok());
    auto rej = (*e)->check_request(p, r);
    if (msg != nullptr) *msg = rej ? rej->message : "";
    return rej ? rej->param : std::string("accepted");
  };
  std::string msg;
  EXPECT_EQ(field(ranker, prompt_of(10), pair_params(Pooling::kNone, 4), nullptr), "accepted");
  EXPECT_EQ(field(ranker, prompt_of(10), pair_params(Pooling::kRank, 10), nullptr), "input");
  EXPECT_EQ(field(ranker, prompt_of(10), pair_params(Pooling::kRank, -1), nullptr), "input");
  EXPECT_EQ(field(encoder, prompt_of(10), pair_params(Pooling::kRank, 4), &msg), "model");
  EXPECT_NE(msg.find("not a reranker"), std::string::npos) << msg;
  EXPECT_EQ(field(ranker, prompt_of(10), greedy(4), &msg), "model");
  EXPECT_NE(msg.find("is a reranker"), std::string::npos) << msg;
  auto e = Engine::create(*ranker.model, ranker.tok.get(), EngineConfig{});
  ASSERT_TRUE(e.is_ok());
  EXPECT_EQ((*e)->default_pooling(), Pooling::kRank);  // the file says rank
}

}  // namespace
}  // namespace pagoda

// Embedding requests through the engine: the pooled vector is the hidden state the model
// computes (last pooling against the logits the same state gives), it does not depend on
// how the prompt was chunked or what else ran in the step, an encoder's tokens see the
// whole sequence (and its prompt is never cut), and what cannot be embedded is refused
// by field.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/embedding.h"
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

RequestParams embed_params(Pooling p) {
  RequestParams r;
  r.embed = true;
  r.pooling = p;
  return r;
}

// A random BERT encoder of `ctx` learned positions.
TinyModel tiny_bert(ThreadPool& pool, const std::string& name, int32_t ctx) {
  RandomModelSpec bert;
  bert.arch = "bert";
  bert.kv_heads = bert.heads;
  bert.ctx = ctx;
  return load_tiny(pool, name, bert);
}


std::vector<float> embed_alone(const TinyModel& m, const std::vector<int32_t>& prompt, Pooling p,
                               int32_t budget = 512) {
  EngineConfig c;
  c.scheduler.max_num_batched_tokens = budget;
  auto e = Engine::create(*m.model, m.tok.get(), c);
  EXPECT_TRUE(e.is_ok()) << e.status().message();
  auto id = (*e)->add_request(prompt, embed_params(p));
  EXPECT_TRUE(id.is_ok()) << id.status().message();
  return embeddings(**e)[*id];
}

// Within 1e-5 of the vectors' scale: SIMD matmuls may round a row differently in a tile
// than alone; the scalar target (engine_exact_scalar) holds them to this too.
void expect_close(const std::vector<float>& a, const std::vector<float>& b) {
  ASSERT_EQ(a.size(), b.size());
  ASSERT_FALSE(a.empty());
  double scale = 0;
  for (float v : a) scale = std::max(scale, static_cast<double>(std::fabs(v)));
  for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-5 * scale + 1e-7) << "element " << i;
}

TEST(Embedding, LastPoolingIsTheStateTheNextTokenLogitsComeFrom) {
  ThreadPool pool(2);
  const TinyModel m = load_tiny(pool, "embed_last");
  const std::vector<int32_t> prompt = prompt_of(21);
  const std::vector<float> h = embed_alone(m, prompt, Pooling::kLast);
  // The same prompt generating: its first token's logits row is output . h.
  EngineConfig c;
  auto e = Engine::create(*m.model, m.tok.get(), c);
  ASSERT_TRUE(e.is_ok());
  RequestParams g = greedy(1);
  g.return_logits = true;
  ASSERT_TRUE((*e)->add_request(prompt, g).is_ok());
  auto out = (*e)->step();
  ASSERT_TRUE(out.is_ok());
  ASSERT_EQ(out->size(), 1u);
  const std::vector<float>& logits = (*out)[0].logits;
  const WeightView& w = m.model->weights().output;
  std::vector<float> row(static_cast<size_t>(w.cols));
  double worst = 0, scale = 0;
  for (int64_t r = 0; r < w.rows; ++r) {
    dequantize_weight_row(w, r, row.data());
    double dot = 0;
    for (size_t i = 0; i < row.size(); ++i) dot += static_cast<double>(row[i]) * h[i];
    worst = std::max(worst, std::fabs(dot - logits[r]));
    scale = std::max(scale, std::fabs(dot));
  }
  EXPECT_LT(worst, 1e-4 * scale) << "the last-token embedding is not the state the logits come from";
}

TEST(Embedding, ChunkedPrefillGivesTheOneStepEmbedding) {
  ThreadPool pool(2);
  const TinyModel m = load_tiny(pool, "embed_chunks");
  const std::vector<int32_t> prompt = prompt_of(45);
  for (Pooling p : {Pooling::kMean, Pooling::kCls, Pooling::kLast}) {
    SCOPED_TRACE(pooling_name(p));
    expect_close(embed_alone(m, prompt, p, 512), embed_alone(m, prompt, p, 8));
  }
  // The mean is the mean: of 45 tokens, not of the last chunk's.
  const std::vector<float> mean = embed_alone(m, prompt, Pooling::kMean, 8);
  const std::vector<float> last = embed_alone(m, prompt, Pooling::kLast, 8);
  EXPECT_NE(mean, last);
}

TEST(Embedding, BatchedWithGenerationMatchesEachAlone) {
  ThreadPool pool(2);
  const TinyModel m = load_tiny(pool, "embed_batched");
  EngineConfig c;
  c.scheduler.max_num_batched_tokens = 64;  // the 30-token prompts share steps and get cut
  auto e = Engine::create(*m.model, m.tok.get(), c);
  ASSERT_TRUE(e.is_ok());
  std::map<RequestId, std::pair<std::vector<int32_t>, Pooling>> asked;
  for (int32_t i = 0; i < 8; ++i) {
    const Pooling p = i % 3 == 0 ? Pooling::kMean : i % 3 == 1 ? Pooling::kCls : Pooling::kLast;
    const std::vector<int32_t> prompt = prompt_of(10 + 5 * i, i);
    if (i % 2 == 0) {
      ASSERT_TRUE((*e)->add_request(prompt_of(12, 100 + i), greedy(6)).is_ok());
    }
    auto id = (*e)->add_request(prompt, embed_params(p));
    ASSERT_TRUE(id.is_ok());
    asked[*id] = {prompt, p};
  }
  const auto got = embeddings(**e);
  ASSERT_EQ(got.size(), asked.size());
  for (const auto& [id, what] : asked) expect_close(got.at(id), embed_alone(m, what.first, what.second));
  const EngineStats st = (*e)->stats();
  EXPECT_EQ(st.embed_requests, 8);
  EXPECT_EQ(st.used_blocks, 0) << "finished embeddings must free their blocks";
}

TEST(Embedding, EncoderTokensSeeTheWholeSequenceDecoderTokensOnlyThePast) {
  ThreadPool pool(2);
  const TinyModel enc = tiny_bert(pool, "embed_bert", 128);
  const TinyModel dec = load_tiny(pool, "embed_causal");
  std::vector<int32_t> a = prompt_of(20), b = a;
  b.back() = b.back() == 7 ? 8 : 7;
  // The first token's state: an encoder's changes with the last token, a decoder's cannot.
  EXPECT_NE(embed_alone(enc, a, Pooling::kCls), embed_alone(enc, b, Pooling::kCls));
  EXPECT_EQ(embed_alone(dec, a, Pooling::kCls), embed_alone(dec, b, Pooling::kCls));
}

TEST(Embedding, EncoderPromptIsNeverCutAndLongOnesRunAlone) {
  ThreadPool pool(2);
  const TinyModel m = tiny_bert(pool, "embed_bert_whole", 128);
  EngineConfig c;
  c.scheduler.max_num_batched_tokens = 16;
  auto e = Engine::create(*m.model, m.tok.get(), c);
  ASSERT_TRUE(e.is_ok());
  std::map<RequestId, std::vector<int32_t>> asked;
  for (int32_t n : {40, 6, 9, 100, 3}) {
    auto id = (*e)->add_request(prompt_of(n, n), embed_params(Pooling::kMean));
    ASSERT_TRUE(id.is_ok()) << id.status().message();
    asked[*id] = prompt_of(n, n);
  }
  const auto got = embeddings(**e);
  ASSERT_EQ(got.size(), asked.size());
  for (const auto& [id, prompt] : asked) expect_close(got.at(id), embed_alone(m, prompt, Pooling::kMean));
  // 40 and 100 alone, 6 + 9 together, 3 after them: four steps, whatever the budget.
  EXPECT_EQ((*e)->stats().steps, 4);
}

TEST(Embedding, WhatCannotBeEmbeddedOrGeneratedIsRefusedByField) {
  ThreadPool pool(2);
  const TinyModel m = tiny_bert(pool, "embed_bert_refuse", 64);
  auto e = Engine::create(*m.model, m.tok.get(), EngineConfig{});
  ASSERT_TRUE(e.is_ok());
  auto field = [&](const std::vector<int32_t>& p, const RequestParams& r) {
    auto rej = (*e)->check_request(p, r);
    return rej ? rej->param : std::string("accepted");
  };
  EXPECT_EQ(field(prompt_of(5), greedy(4)), "model");
  EXPECT_EQ(field({}, embed_params(Pooling::kNone)), "input");
  EXPECT_EQ(field(prompt_of(64), embed_params(Pooling::kNone)), "accepted");  // the whole context
  EXPECT_EQ(field(prompt_of(65), embed_params(Pooling::kNone)), "input");
  EXPECT_EQ(field({5, 1 << 20}, embed_params(Pooling::kNone)), "input");
  RequestParams two = embed_params(Pooling::kNone);
  two.n = 2;
  EXPECT_EQ(field(prompt_of(5), two), "n");
  EXPECT_EQ((*e)->default_pooling(), Pooling::kMean);  // the file says mean
}

TEST(Embedding, NormalizationsAreLlamaCppsNorms) {
  std::vector<float> v = {3.0f, -4.0f, 0.0f};
  ASSERT_TRUE(normalize_embedding(v, 2).is_ok());
  EXPECT_FLOAT_EQ(v[0], 0.6f);
  EXPECT_FLOAT_EQ(v[1], -0.8f);
  v = {3.0f, -4.0f, 1.0f};
  ASSERT_TRUE(normalize_embedding(v, 1).is_ok());
  EXPECT_FLOAT_EQ(v[0] - v[1] + v[2], 1.0f);
  v = {3.0f, -4.0f, 1.0f};
  ASSERT_TRUE(normalize_embedding(v, 0).is_ok());
  EXPECT_FLOAT_EQ(v[1], -32760.0f);
  v = {3.0f, -4.0f};
  ASSERT_TRUE(normalize_embedding(v, 3).is_ok());
  EXPECT_NEAR(std::pow(3.0, 3) / (27 + 64), std::pow(v[0], 3), 1e-6);
  v = {3.0f, -4.0f};
  ASSERT_TRUE(normalize_embedding(v, -1).is_ok());
  EXPECT_EQ(v, (std::vector<float>{3.0f, -4.0f}));
  std::vector<float> zero = {0.0f, 0.0f};
  ASSERT_TRUE(normalize_embedding(zero, 2).is_ok());
  EXPECT_EQ(zero, (std::vector<float>{0.0f, 0.0f}));
  EXPECT_FALSE(normalize_embedding(v, -2).is_ok());
}

}  // namespace
}  // namespace pagoda

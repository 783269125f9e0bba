#include "model/parallel.h"

#include <gtest/gtest.h>

#include "model/arch_spec.h"
#include "model/config.h"

namespace pagoda {
namespace {

ModelConfig shape(const char* arch, int32_t heads, int32_t kv_heads, int32_t embd, int32_t ff, int32_t layers = 4,
                  int32_t vocab = 1000) {
  ModelConfig c;
  c.arch = find_arch(arch);
  c.arch_name = arch;
  c.n_head = heads;
  c.n_head_kv = kv_heads;
  c.head_dim = 64;
  c.n_embd = embd;
  c.n_ff = ff;
  c.n_layer = layers;
  c.n_vocab = vocab;
  return c;
}

int64_t covered(const std::vector<Range>& parts) {
  int64_t at = 0;
  for (const Range& r : parts) {
    EXPECT_EQ(r.begin, at);
    EXPECT_GT(r.size(), 0);
    at = r.end;
  }
  return at;
}

TEST(ParallelSplit, OneProcessHoldsEverything) {
  auto s = plan_split(shape("llama", 8, 2, 512, 1024), 1, 1, 0);
  ASSERT_TRUE(s.is_ok());
  EXPECT_EQ(s->q_heads.size(), 8);
  EXPECT_EQ(s->kv_heads.size(), 2);
  EXPECT_EQ(s->layers.size(), 4);
  EXPECT_FALSE(s->tensor_parallel());
  EXPECT_FALSE(s->pipelined());
}

TEST(ParallelSplit, TensorRanksTakeWholeGroupsOfHeads) {
  const ModelConfig c = shape("llama", 8, 2, 512, 1024);
  for (int32_t r = 0; r < 2; ++r) {
    auto s = plan_split(c, 2, 1, r);
    ASSERT_TRUE(s.is_ok());
    EXPECT_EQ(s->kv_heads.begin, r);
    EXPECT_EQ(s->kv_heads.size(), 1);
    EXPECT_EQ(s->q_heads.begin, 4 * r);
    EXPECT_EQ(s->q_heads.size(), 4);
    EXPECT_EQ(covered(s->attn), 8 * 64);
    EXPECT_EQ(covered(s->embd), 512);
    EXPECT_EQ(covered(s->ffn), 1024);
    EXPECT_EQ(covered(s->vocab), 1000);
  }
}

TEST(ParallelSplit, FewerKvHeadsThanRanksAreShared) {
  // Gemma 3 270M's shape: 4 query heads reading one KV head.
  const ModelConfig c = shape("gemma3", 4, 1, 640, 2048);
  for (int32_t r = 0; r < 2; ++r) {
    auto s = plan_split(c, 2, 1, r);
    ASSERT_TRUE(s.is_ok());
    EXPECT_EQ(s->kv_heads.begin, 0);
    EXPECT_EQ(s->kv_heads.size(), 1);
    EXPECT_EQ(s->q_heads.begin, 2 * r);
    EXPECT_EQ(s->q_heads.size(), 2);
  }
  // Two KV heads over four ranks: each held twice.
  const ModelConfig q = shape("qwen2", 14, 2, 896, 4864);
  for (int32_t r = 0; r < 4; ++r) {
    auto s = plan_split(q, 4, 1, r);
    ASSERT_TRUE(s.is_ok());
    EXPECT_EQ(s->kv_heads.begin, r / 2);
    EXPECT_EQ(s->q_heads.begin, (r / 2) * 7 + (r % 2 == 0 ? 0 : 3));
  }
}

TEST(ParallelSplit, RowSlicesStartOnPanelBoundaries) {
  // Repacked matrices are read in 16-row panels: a slice starting inside one would run
  // its rows through another body than one process does.
  auto s = plan_split(shape("llama", 8, 8, 896, 4864, 4, 151936), 3, 1, 1);
  ASSERT_TRUE(s.is_ok());
  for (const auto* parts : {&s->embd, &s->ffn, &s->vocab})
    for (const Range& r : *parts) EXPECT_EQ(r.begin % 16, 0);
  EXPECT_EQ(covered(s->vocab), 151936);
}

TEST(ParallelSplit, StagesTakeContiguousLayers) {
  const ModelConfig c = shape("llama", 8, 2, 512, 1024, 5);
  int64_t at = 0;
  for (int32_t stage = 0; stage < 2; ++stage)
    for (int32_t t = 0; t < 2; ++t) {
      auto s = plan_split(c, 2, 2, stage * 2 + t);
      ASSERT_TRUE(s.is_ok());
      EXPECT_EQ(s->pp_rank, stage);
      EXPECT_EQ(s->tp_rank, t);
      EXPECT_EQ(s->layers.begin, at);
      if (t == 1) at = s->layers.end;
    }
  EXPECT_EQ(at, 5);
}

TEST(ParallelSplit, TensorRanksSplitEveryExpertLikeTheDenseFfn) {
  ModelConfig moe = shape("qwen2moe", 8, 2, 512, 0);
  moe.n_expert = 4;
  moe.n_expert_used = 2;
  moe.n_ff_exp = 352;
  moe.n_ff_shexp = 1408;
  for (int32_t r = 0; r < 2; ++r) {
    auto s = plan_split(moe, 2, 1, r);
    ASSERT_TRUE(s.is_ok()) << s.status().message();
    EXPECT_EQ(covered(s->ffn_exp), 352);
    EXPECT_EQ(covered(s->ffn_shexp), 1408);
    // Slices start on 16-row panels, so each rank's rows run through the same kernel body.
    EXPECT_EQ(s->ffn_exp[1].begin % 16, 0);
    EXPECT_EQ(s->ffn_shexp[1].begin % 16, 0);
  }
  EXPECT_TRUE(plan_split(moe, 1, 2, 1).is_ok());  // and by layers
  moe.n_ff_exp = 1;
  EXPECT_FALSE(plan_split(moe, 2, 1, 0).is_ok());  // experts too narrow for two ranks
}

TEST(ParallelSplit, RefusesWhatCannotBeSplit) {
  auto uneven = plan_split(shape("llama", 8, 2, 512, 1024), 3, 1, 0);
  ASSERT_FALSE(uneven.is_ok());
  EXPECT_NE(uneven.status().message().find("KV heads"), std::string::npos);
  EXPECT_FALSE(plan_split(shape("llama", 2, 1, 512, 1024), 4, 1, 0).is_ok());  // more ranks than heads
  EXPECT_FALSE(plan_split(shape("llama", 8, 2, 512, 1024, 2), 1, 3, 0).is_ok());  // more stages than layers
  EXPECT_FALSE(plan_split(shape("llama", 8, 2, 512, 1024), 2, 1, 2).is_ok());     // rank outside
  EXPECT_FALSE(plan_split(shape("olmo2", 8, 8, 512, 1024), 2, 1, 0).is_ok());  // QK-norm over all heads
}

}  // namespace
}  // namespace pagoda

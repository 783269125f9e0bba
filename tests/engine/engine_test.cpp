// The engine against an independent oracle: each request run alone through a fresh
// engine. Batching, chunked prefill, prefix caching, preemption and copy-on-write must
// change nothing a request sees. Exact equality needs the kernels to give a token the same
// result whatever else is in its batch, which holds on the scalar target (see
// tests/kernels/batch_invariance_test.cpp); ctest runs these tests a second time with
// PAGODA_CPU=scalar (the *_scalar entries), and on SIMD targets the output checks skip.
#include "engine/engine.h"

#include <gtest/gtest.h>

#include <random>

#include "engine_test_util.h"
#include "kernels/matmul/packed_weights.h"
#include "kernels/simd/simd_target.h"

namespace pagoda {
namespace {

using testing_util::drain;
using testing_util::greedy;
using testing_util::load_tiny;
using testing_util::mixed_workload;
using testing_util::Outputs;
using testing_util::run_alone;
using testing_util::Workload;


// 64 requests of mixed lengths under memory pressure, each compared with its run alone
// (plain decoding, whatever `c` turns on).
EngineStats check_mixed_workload(const testing_util::TinyModel& m, EngineConfig c = {}, int32_t blocks = 48,
                                 Model* draft = nullptr) {
  const Workload w = mixed_workload(64, m.model->config().n_vocab, 7);
  c.scheduler.max_num_seqs = 16;
  c.scheduler.max_num_batched_tokens = 64;  // long prompts go in chunks
  // 48 blocks of 16: room for about 6 sequences of this workload, so 16 running must
  // preempt once the long ones grow.
  c.kv_cache_bytes = KvStorage::bytes_per_block(Engine::kv_shape(m.model->config(), EngineConfig{})) * blocks;
  auto e = Engine::create(*m.model, m.tok.get(), c, draft);
  EXPECT_TRUE(e.is_ok()) << e.status().message();
  if (!e.is_ok()) return {};
  std::vector<RequestId> ids;
  for (size_t i = 0; i < w.prompts.size(); ++i) ids.push_back(*(*e)->add_request(w.prompts[i], greedy(w.max_tokens[i])));
  std::map<RequestId, FinishReason> finish;
  Outputs got = drain(**e, &finish);
  const EngineStats st = (*e)->stats();
  EXPECT_GT(st.preemptions, 0) << "the workload was meant to run out of KV blocks";
  EXPECT_GT(st.prefix_hit_tokens, 0) << "the shared prefix was meant to hit the cache";
  EXPECT_EQ(st.used_blocks, 0) << "finished requests must free every block";
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::vector<int32_t> alone = run_alone(*m.model, m.tok.get(), w.prompts[i], greedy(w.max_tokens[i]));
    EXPECT_EQ((got[{ids[i], 0}]), alone) << "request " << i << " (prompt " << w.prompts[i].size() << " tokens)";
    EXPECT_EQ(finish[ids[i]], FinishReason::kLength);
    EXPECT_EQ((static_cast<int32_t>(got[{ids[i], 0}].size())), w.max_tokens[i]);
  }
  return st;
}

// Speculative decoding by prompt lookup through the same workload: drafts computed with
// the last token in one step, verified row by row, the rejected ones' KV rolled back,
// under chunked prefill, prefix caching and preemption; every request's greedy tokens
// equal plain decoding's.
EngineConfig ngram_speculation(int32_t k) {
  EngineConfig c;
  c.speculative.method = "ngram";
  c.speculative.num_speculative_tokens = k;
  c.speculative.prompt_lookup_max = 3;
  return c;
}

TEST(Engine, SpeculativeDecodingMixedWorkloadMatchesPlainDecoding) {
  REQUIRE_EXACT_BATCHING();
  ThreadPool pool(2);
  for (int32_t k : {1, 4}) {
    SCOPED_TRACE(k);
    // Fewer blocks for longer drafts: their sequences finish in fewer steps and must still
    // run the pool dry (rolled-back drafts of preempted sequences included).
    const EngineStats st = check_mixed_workload(load_tiny(pool, "engine_spec"), ngram_speculation(k), k == 1 ? 48 : 36);
    EXPECT_GT(st.spec_drafted_tokens, 0);
    EXPECT_GT(st.spec_accepted_tokens, 0) << "random models loop, so prompt lookup must hit";
    EXPECT_LE(st.spec_accepted_tokens, st.spec_drafted_tokens);
  }
}

// Trees of drafts (several earlier occurrences' continuations verified in one step, each
// node attending to its own branch, the accepted branch's KV moved into place) through
// the same workload: every request's greedy tokens equal plain decoding's, and some
// accepted tokens came from a branch other than the first (what a chain would have lost).
TEST(Engine, DraftTreesMixedWorkloadMatchPlainDecoding) {
  REQUIRE_EXACT_BATCHING();
  ThreadPool pool(2);
  EngineConfig c = ngram_speculation(4);
  c.speculative.branches = 3;
  c.speculative.prompt_lookup_min = 1;
  const EngineStats st = check_mixed_workload(load_tiny(pool, "engine_spec_tree"), c, 36);
  EXPECT_GT(st.spec_accepted_tokens, 0);
  EXPECT_GT(st.spec_branch_accepted_tokens, 0) << "random models loop, so later branches must hit too";
  EXPECT_LE(st.spec_branch_accepted_tokens, st.spec_accepted_tokens);
}

// A draft model through the same workload: its own paged KV follows each sequence
// (rolled back to what the target accepted, cut where preemption took the target's), and
// whatever it proposes, every request's greedy tokens equal plain decoding's. A copy of the
// target drafts exactly what the target picks; a model of other weights and fewer layers
// drafts mostly wrong guesses, which must cost nothing but time.
EngineConfig draft_speculation(int32_t k) {
  EngineConfig c;
  c.speculative.method = "draft_model";
  c.speculative.model = "draft.gguf";
  c.speculative.num_speculative_tokens = k;
  c.speculative.draft_p_min = 0.0f;
  // Every step drafts, whatever a draft costs here: these tests are about exactness.
  c.speculative.cost_gate = false;
  return c;
}

TEST(Engine, DraftModelMixedWorkloadMatchesPlainDecoding) {
  REQUIRE_EXACT_BATCHING();
  ThreadPool pool(2);
  const testing_util::TinyModel target = load_tiny(pool, "engine_draft_target");
  const testing_util::TinyModel same = load_tiny(pool, "engine_draft_same");
  RandomModelSpec other_spec;
  other_spec.seed = 7;
  other_spec.layers = 1;
  const testing_util::TinyModel other = load_tiny(pool, "engine_draft_other", other_spec);
  const EngineStats st_same = check_mixed_workload(target, draft_speculation(4), 30, same.model.get());
  EXPECT_GT(st_same.spec_drafted_tokens, 0);
  EXPECT_GT(st_same.spec_draft_forwards, 0);
  // The copy guesses right wherever a draft is verified whole; only drafts cut by a
  // request's end or its preemption are lost.
  EXPECT_GE(st_same.spec_accepted_tokens * 10, st_same.spec_drafted_tokens * 9)
      << st_same.spec_accepted_tokens << " of " << st_same.spec_drafted_tokens;
  const EngineStats st_other = check_mixed_workload(target, draft_speculation(4), 40, other.model.get());
  EXPECT_GT(st_other.spec_drafted_tokens, 0);
  EXPECT_LT(st_other.spec_accepted_tokens, st_same.spec_accepted_tokens);
  // With branches, a draft's next-best tokens where it is unsure go beside its chain as
  // leaves: still plain decoding's tokens whatever the draft. A 4-bit copy of the target
  // (self-speculation) is unsure where the target's choice is a near tie, and its second
  // choice is then often the target's first.
  EngineConfig tree = draft_speculation(4);
  tree.speculative.branches = 3;
  const EngineStats st_tree = check_mixed_workload(target, tree, 40, other.model.get());
  EXPECT_GT(st_tree.spec_drafted_tokens, st_other.spec_drafted_tokens);
  RandomModelSpec low_spec;
  low_spec.type = DType::Q4_0;
  const testing_util::TinyModel low = load_tiny(pool, "engine_draft_q4", low_spec);
  const EngineStats st_low = check_mixed_workload(target, tree, 36, low.model.get());
  EXPECT_GT(st_low.spec_branch_accepted_tokens, 0);
}

// The cost gate with a draft that is always right (a copy of the target): at 0.3 of a
// target step per draft token it pays (up to 5 tokens a step for 2.2 steps' time) and
// keeps drafting; at 1.5 steps per token nothing comes near paying (k + 1 tokens for
// 1 + 1.5 k steps at best, under the gate's 0.9 floor), so once each sequence has drafted
// a few steps it stops, probing now and then. Outputs stay plain decoding's either way.
TEST(Engine, DraftModelThatDoesNotPayStopsDrafting) {
  REQUIRE_EXACT_BATCHING();
  ThreadPool pool(2);
  const testing_util::TinyModel target = load_tiny(pool, "engine_gate_target");
  const testing_util::TinyModel same = load_tiny(pool, "engine_gate_same");
  auto gated = [](double cost) {
    EngineConfig c = draft_speculation(4);
    c.speculative.cost_gate = true;
    c.speculative.fixed_draft_cost = cost;
    return c;
  };
  const EngineStats always = check_mixed_workload(target, draft_speculation(4), 30, same.model.get());
  const EngineStats cheap = check_mixed_workload(target, gated(0.3), 30, same.model.get());
  const EngineStats dear = check_mixed_workload(target, gated(1.5), 30, same.model.get());
  EXPECT_GE(cheap.spec_drafted_tokens * 10, always.spec_drafted_tokens * 8)
      << cheap.spec_drafted_tokens << " drafted at cost 0.3, " << always.spec_drafted_tokens << " without the gate";
  EXPECT_GT(dear.spec_drafted_tokens, 0) << "a sequence drafts a few steps before the gate judges it";
  EXPECT_LT(dear.spec_drafted_tokens * 2, always.spec_drafted_tokens)
      << dear.spec_drafted_tokens << " drafted at cost 1.5, " << always.spec_drafted_tokens << " without the gate";
}

// The samples of one request (n > 1) draft each for itself, sharing the prompt's KV in the
// draft's pool as in the target's; seeded sampled requests give the same tokens batched
// as alone, with a draft model as with prompt lookup.
TEST(Engine, DraftModelServesForkedAndSampledRequestsAsPlainDecodingDoes) {
  REQUIRE_EXACT_BATCHING();
  ThreadPool pool(2);
  auto m = load_tiny(pool, "engine_draft_fork");
  auto d = load_tiny(pool, "engine_draft_fork_draft");
  std::vector<int32_t> prompt;
  for (int i = 0; i < 37; ++i) prompt.push_back(5 + 7 * i % 400);
  RequestParams p = greedy(24);
  p.n = 3;
  auto e = Engine::create(*m.model, m.tok.get(), draft_speculation(3), d.model.get());
  ASSERT_TRUE(e.is_ok()) << e.status().message();
  const RequestId id = *(*e)->add_request(prompt, p);
  Outputs got = drain(**e);
  const std::vector<int32_t> alone = run_alone(*m.model, m.tok.get(), prompt, greedy(24));
  for (int32_t i = 0; i < 3; ++i) EXPECT_EQ((got[{id, i}]), alone) << "sample " << i;
  EXPECT_GT((*e)->stats().spec_accepted_tokens, 0);
  EXPECT_EQ((*e)->stats().used_blocks, 0);
  EXPECT_GT((*e)->draft_model()->pool().num_cached_free(), 0) << "the samples' common prompt should be cached";

  const Workload w = mixed_workload(12, m.model->config().n_vocab, 9);
  auto sampled = [&](size_t i) {
    RequestParams s = greedy(w.max_tokens[i]);
    s.sampling.temperature = 0.8f;
    s.sampling.seed = 300 + i;
    return s;
  };
  auto batched = Engine::create(*m.model, m.tok.get(), draft_speculation(4), d.model.get());
  ASSERT_TRUE(batched.is_ok());
  std::vector<RequestId> ids;
  for (size_t i = 0; i < w.prompts.size(); ++i) ids.push_back(*(*batched)->add_request(w.prompts[i], sampled(i)));
  Outputs all = drain(**batched);
  EXPECT_GT((*batched)->stats().spec_accepted_tokens, 0);
  for (size_t i = 0; i < ids.size(); ++i) {
    auto one = Engine::create(*m.model, m.tok.get(), draft_speculation(4), d.model.get());
    ASSERT_TRUE(one.is_ok());
    const RequestId rid = *(*one)->add_request(w.prompts[i], sampled(i));
    EXPECT_EQ((all[{ids[i], 0}]), (drain(**one)[{rid, 0}])) << "request " << i;
  }
}

TEST(Engine, DraftModelMethodWithoutADraftIsRefused) {
  ThreadPool pool(1);
  auto m = load_tiny(pool, "engine_draft_missing");
  auto e = Engine::create(*m.model, m.tok.get(), draft_speculation(2));
  ASSERT_FALSE(e.is_ok());
  EXPECT_NE(e.status().message().find("needs the draft model"), std::string::npos) << e.status().message();
}

// LongRoPE (Phi-3) picks its factors by how long a sequence may grow: the engine's
// max_model_len against rope.scaling.original_context_length, as llama.cpp does by its
// per-sequence context.
TEST(Engine, LongRopeFactorsFollowMaxModelLen) {
  ThreadPool pool(1);
  RandomModelSpec spec;
  spec.arch = "phi3";
  spec.longrope = true;
  spec.rope_orig_ctx = 64;
  testing_util::TinyModel t = testing_util::load_tiny(pool, "engine_longrope", spec);
  for (const int32_t len : {64, 65, 2048}) {
    EngineConfig c;
    c.kv_cache_bytes = 16ull << 20;
    c.max_model_len = len;
    auto e = Engine::create(*t.model, t.tok.get(), c);
    ASSERT_TRUE(e.is_ok()) << e.status().message();
    ASSERT_EQ((*e)->max_model_len(), len);
    EXPECT_EQ(t.model->config().rope.freq_factors,
              len > 64 ? t.model->weights().rope_long : t.model->weights().rope_short)
        << len;
  }
}

TEST(Engine, MixedWorkloadUnderMemoryPressureMatchesEachRequestRunAlone) {
  REQUIRE_EXACT_BATCHING();
  ThreadPool pool(2);
  check_mixed_workload(load_tiny(pool, "engine_mixed"));
}

// Mixtures of experts: a step's tokens are grouped by expert, so which other tokens share a
// step decides how each expert's block is laid out; none of it may change a request.
// Mixtral-style (llama with experts) and Qwen2-MoE (with its shared expert).
TEST(Engine, MixtureOfExpertsMixedWorkloadMatchesEachRequestRunAlone) {
  REQUIRE_EXACT_BATCHING();
  for (const char* arch : {"llama", "qwen2moe"}) {
    SCOPED_TRACE(arch);
    ThreadPool pool(2);
    RandomModelSpec spec;
    spec.arch = arch;
    spec.experts = 8;
    spec.experts_used = 2;
    spec.ff = 64;
    check_mixed_workload(load_tiny(pool, std::string("engine_moe_") + arch, spec));
  }
}

// Sampled requests speculate too (modified rejection sampling, tests/sampling): a seeded
// request gives the same tokens batched with others as alone, both with drafts.
TEST(Engine, SpeculativeSamplingIsReproducibleAndBatchIndependent) {
  REQUIRE_EXACT_BATCHING();
  ThreadPool pool(2);
  auto m = load_tiny(pool, "engine_spec_sampled");
  const Workload w = mixed_workload(16, m.model->config().n_vocab, 5);
  auto sampled = [&](size_t i) {
    RequestParams p = greedy(w.max_tokens[i]);
    p.sampling.temperature = 0.7f;
    p.sampling.seed = 100 + i;
    return p;
  };
  for (int32_t branches : {1, 3}) {
    SCOPED_TRACE(branches);
    EngineConfig c = ngram_speculation(4);
    c.speculative.branches = branches;
    auto e = Engine::create(*m.model, m.tok.get(), c);
    ASSERT_TRUE(e.is_ok());
    std::vector<RequestId> ids;
    for (size_t i = 0; i < w.prompts.size(); ++i) ids.push_back(*(*e)->add_request(w.prompts[i], sampled(i)));
    Outputs got = drain(**e);
    EXPECT_GT((*e)->stats().spec_accepted_tokens, 0);
    for (size_t i = 0; i < ids.size(); ++i) {
      auto one = Engine::create(*m.model, m.tok.get(), c);
      ASSERT_TRUE(one.is_ok());
      const RequestId id = *(*one)->add_request(w.prompts[i], sampled(i));
      EXPECT_EQ((got[{ids[i], 0}]), (drain(**one)[{id, 0}])) << "request " << i;
    }
  }
}

// Matrices repacked into panels (kernels/matmul/packed_weights.h) are computed the same way for
// one token as for many, so on AVX-512 a Q8_0 or Q4_0 model batches exactly with the SIMD
// kernels themselves, not only on the scalar target.
TEST(Engine, PackedWeightsBatchExactlyOnTheirSimdKernels) {
  for (DType t : {DType::Q8_0, DType::Q4_0}) {
    if (packed_kernels(t) == nullptr)
      GTEST_SKIP() << dtype_name(t) << " matrices are not repacked here (no AVX-512 VNNI, PAGODA_CPU or PAGODA_REPACK=0)";
    SCOPED_TRACE(dtype_name(t));
    ThreadPool pool(2);
    RandomModelSpec spec;
    spec.type = t;
    const testing_util::TinyModel m = load_tiny(pool, std::string("engine_packed_") + std::string(dtype_name(t)), spec);
    {
      SCOPED_TRACE("plain decoding");
      check_mixed_workload(m);
    }
    // Verifying drafts is a batched step too: the same panels give the same rows.
    SCOPED_TRACE("prompt lookup");
    EXPECT_GT(check_mixed_workload(m, ngram_speculation(4)).spec_accepted_tokens, 0);
    // And a tree's nodes, masked to their branches.
    EngineConfig tree = ngram_speculation(4);
    tree.speculative.branches = 3;
    EXPECT_GT(check_mixed_workload(m, tree, 36).spec_branch_accepted_tokens, 0);
  }
}

TEST(Engine, Int8KvCacheBatchesExactlyToo) {
  REQUIRE_EXACT_BATCHING();
  ThreadPool pool(2);
  auto m = load_tiny(pool, "engine_int8");
  const Workload w = mixed_workload(16, m.model->config().n_vocab, 9);
  EngineConfig c;
  c.kv_type = KvType::kI8;
  c.scheduler.max_num_batched_tokens = 48;
  c.kv_cache_bytes = KvStorage::bytes_per_block(Engine::kv_shape(m.model->config(), c)) * 24;
  auto e = Engine::create(*m.model, m.tok.get(), c);
  ASSERT_TRUE(e.is_ok());
  std::vector<RequestId> ids;
  for (size_t i = 0; i < w.prompts.size(); ++i) ids.push_back(*(*e)->add_request(w.prompts[i], greedy(w.max_tokens[i])));
  Outputs got = drain(**e);
  EXPECT_GT((*e)->stats().preemptions, 0);
  EngineConfig alone_c;
  alone_c.kv_type = KvType::kI8;
  for (size_t i = 0; i < ids.size(); ++i) {
    auto one = Engine::create(*m.model, m.tok.get(), alone_c);
    ASSERT_TRUE(one.is_ok());
    const RequestId id = *(*one)->add_request(w.prompts[i], greedy(w.max_tokens[i]));
    EXPECT_EQ((got[{ids[i], 0}]), (drain(**one)[{id, 0}])) << "request " << i;
  }
}

TEST(Engine, StaticBatchingGivesTheSameOutputs) {
  REQUIRE_EXACT_BATCHING();
  ThreadPool pool(2);
  auto m = load_tiny(pool, "engine_static");
  const Workload w = mixed_workload(20, m.model->config().n_vocab, 11);
  EngineConfig c;
  c.scheduler.mode = ScheduleMode::kStatic;
  c.scheduler.max_num_seqs = 8;
  auto e = Engine::create(*m.model, m.tok.get(), c);
  ASSERT_TRUE(e.is_ok());
  std::vector<RequestId> ids;
  for (size_t i = 0; i < w.prompts.size(); ++i) ids.push_back(*(*e)->add_request(w.prompts[i], greedy(w.max_tokens[i])));
  Outputs got = drain(**e);
  for (size_t i = 0; i < ids.size(); ++i)
    EXPECT_EQ((got[{ids[i], 0}]), run_alone(*m.model, m.tok.get(), w.prompts[i], greedy(w.max_tokens[i]))) << i;
}

// Static batching cannot grow a row's cache, so it reserves rows x (longest prompt +
// largest max_tokens) at admission; at equal KV memory it admits fewer requests than paged
// continuous batching, and its padding rows never need more blocks (no preemption).
TEST(Engine, StaticBatchingReservesTheBatchsRectangleAtAdmission) {
  ThreadPool pool(2);
  auto m = load_tiny(pool, "engine_static_reserve");
  const auto admitted_after_one_step = [&](ScheduleMode mode, int32_t max_tokens) {
    EngineConfig c;
    c.scheduler.mode = mode;
    c.scheduler.max_num_seqs = 8;
    // 20 blocks of 16 positions; each request: a 10-token prompt, so 70 positions (5 blocks)
    // with 60 output tokens reserved.
    c.kv_cache_bytes = KvStorage::bytes_per_block(Engine::kv_shape(m.model->config(), EngineConfig{})) * 20;
    auto e = Engine::create(*m.model, m.tok.get(), c);
    EXPECT_TRUE(e.is_ok());
    std::vector<int32_t> prompt(10);
    for (int i = 0; i < 10; ++i) prompt[static_cast<size_t>(i)] = 3 + i;
    // Every other request stops early; the rectangle still takes the largest max_tokens.
    std::map<RequestId, int32_t> wanted;
    for (int i = 0; i < 8; ++i) {
      const int32_t n = i % 2 ? max_tokens : 20;
      auto id = (*e)->add_request(prompt, greedy(n));
      EXPECT_TRUE(id.is_ok());
      if (id.is_ok()) wanted[*id] = n;
    }
    auto first = (*e)->step();
    EXPECT_TRUE(first.is_ok());
    const EngineStats st = (*e)->stats();
    Outputs got = drain(**e);
    for (const StepOutput& o : *first) got[{o.request, o.index}].insert(got[{o.request, o.index}].begin(), o.token);
    EXPECT_EQ(got.size(), 8u) << "every request must still complete";
    const int32_t longest = std::min(max_tokens, (*e)->max_model_len() - 10);
    for (const auto& [key, toks] : got)
      EXPECT_EQ(static_cast<int32_t>(toks.size()), std::min(wanted[key.first], longest));
    if (mode == ScheduleMode::kStatic && max_tokens < 100) {
      EXPECT_EQ((*e)->stats().preemptions, 0) << "padding rows outgrew the rectangle";
    }
    return std::pair{st.num_running, st.used_blocks};
  };
  EXPECT_EQ(admitted_after_one_step(ScheduleMode::kStatic, 60), (std::pair<size_t, int32_t>{4, 20}));
  EXPECT_EQ(admitted_after_one_step(ScheduleMode::kContinuous, 60).first, 8u);
  // A request whose reservation would not fit even an empty pool still runs, growing as
  // it goes (the context caps max_tokens at 320 positions here).
  EXPECT_EQ(admitted_after_one_step(ScheduleMode::kStatic, 400).first, 1u);
}

TEST(Engine, GreedySamplesOfOneRequestShareThePromptAndAgree) {
  REQUIRE_EXACT_BATCHING();
  ThreadPool pool(2);
  auto m = load_tiny(pool, "engine_fork");
  // 21 tokens: the prompt's last block is partly filled, so every sample's first decode
  // writes into a shared block (copy-on-write).
  std::vector<int32_t> prompt;
  for (int i = 0; i < 21; ++i) prompt.push_back(5 + 7 * i % 400);
  RequestParams p = greedy(20);
  p.n = 4;
  auto e = Engine::create(*m.model, m.tok.get(), EngineConfig{});
  ASSERT_TRUE(e.is_ok());
  const RequestId id = *(*e)->add_request(prompt, p);
  Outputs got = drain(**e);
  const std::vector<int32_t> alone = run_alone(*m.model, m.tok.get(), prompt, greedy(20));
  for (int32_t i = 0; i < 4; ++i) EXPECT_EQ((got[{id, i}]), alone) << "sample " << i;
  EXPECT_EQ((*e)->stats().used_blocks, 0);
}

TEST(Engine, SeededSamplesEqualSingleRequestsWithConsecutiveSeeds) {
  REQUIRE_EXACT_BATCHING();
  ThreadPool pool(2);
  auto m = load_tiny(pool, "engine_seeds");
  const std::vector<int32_t> prompt{1, 40, 41, 42, 43, 44, 45, 46, 47, 48};
  RequestParams p;
  p.sampling.temperature = 1.0f;
  p.sampling.seed = 1234;
  p.max_tokens = 16;
  p.ignore_eos = true;
  p.n = 3;
  auto e = Engine::create(*m.model, m.tok.get(), EngineConfig{});
  ASSERT_TRUE(e.is_ok());
  const RequestId id = *(*e)->add_request(prompt, p);
  Outputs got = drain(**e);
  for (int32_t i = 0; i < 3; ++i) {
    RequestParams one = p;
    one.n = 1;
    one.sampling.seed = 1234 + static_cast<uint64_t>(i);
    EXPECT_EQ((got[{id, i}]), run_alone(*m.model, m.tok.get(), prompt, one)) << "sample " << i;
  }
  EXPECT_NE((got[{id, 0}]), (got[{id, 1}])) << "different seeds should give different samples";
}

// With a real vocabulary a step's samples are drawn in parallel across sequences; each
// draws from its own sampler, so a batch of seeded, forked and logprob-reporting requests
// gets exactly the tokens each request draws alone (one row, drawn inline).
TEST(Engine, SampledRequestsDrawInABatchWhatTheyDrawAlone) {
  if (!testing_util::exact_batching() && packed_kernels(DType::Q8_0) == nullptr)
    GTEST_SKIP() << "needs exact batching: the scalar target or repacked Q8_0 (AVX-512 VNNI)";
  ThreadPool pool(2);
  RandomModelSpec spec;
  spec.type = DType::Q8_0;
  spec.vocab = 8192;  // 16 rows of 8192 logits: enough to sample in parallel
  auto m = load_tiny(pool, "engine_parallel_sampling", spec);
  std::vector<std::vector<int32_t>> prompts;
  std::vector<RequestParams> params;
  for (int i = 0; i < 16; ++i) {
    std::vector<int32_t> p;
    for (int k = 0; k < 5 + i; ++k) p.push_back(3 + (i * 131 + k * 17) % 8000);
    prompts.push_back(p);
    RequestParams r;
    r.sampling.temperature = 0.9f;
    r.sampling.seed = 100 + static_cast<uint64_t>(i);
    r.max_tokens = 12;
    r.ignore_eos = true;
    if (i % 4 == 1) r.logprobs = 2;
    if (i % 5 == 2) r.n = 2;  // forks on its first sample; sample k draws with seed + k
    params.push_back(r);
  }
  auto e = Engine::create(*m.model, m.tok.get(), EngineConfig{});
  ASSERT_TRUE(e.is_ok());
  std::vector<RequestId> ids;
  for (size_t i = 0; i < prompts.size(); ++i) ids.push_back(*(*e)->add_request(prompts[i], params[i]));
  Outputs got = drain(**e);
  for (size_t i = 0; i < ids.size(); ++i)
    for (int32_t k = 0; k < params[i].n; ++k) {
      RequestParams one = params[i];
      one.n = 1;
      one.sampling.seed += static_cast<uint64_t>(k);
      EXPECT_EQ((got[{ids[i], k}]), run_alone(*m.model, m.tok.get(), prompts[i], one)) << "request " << i << " sample " << k;
    }
  EXPECT_NE((got[{ids[0], 0}]), (got[{ids[1], 0}]));
}

TEST(Engine, CachedPrefixIsReusedAndChangesNothing) {
  REQUIRE_EXACT_BATCHING();
  ThreadPool pool(2);
  auto m = load_tiny(pool, "engine_prefix");
  std::vector<int32_t> a(100), b;
  for (int i = 0; i < 100; ++i) a[i] = 3 + (i * 13) % 500;
  b = a;
  b.resize(90);
  b.push_back(77);
  auto e = Engine::create(*m.model, m.tok.get(), EngineConfig{});
  ASSERT_TRUE(e.is_ok());
  const testing_util::ReuseRun got = testing_util::run_then_reuse(**e, a, b, 8);
  EXPECT_EQ(got.b_cached, 80) << "5 full blocks of the 91-token prompt are shared with the first";
  EXPECT_EQ(got.a, run_alone(*m.model, m.tok.get(), a, greedy(8)));
  EXPECT_EQ(got.b, run_alone(*m.model, m.tok.get(), b, greedy(8)));
}

// --- Checks that hold on every target ------------------------------------------------

// A request is admitted only if every running sequence could still get its next block
// afterwards. Here the second prompt would fit beside the first, but then both would
// outgrow the pool and one would be preempted and recomputed; it waits instead.
TEST(Engine, AdmissionLeavesEachRunningSequenceAFreeBlock) {
  ThreadPool pool(2);
  auto m = load_tiny(pool, "engine_headroom");
  auto e = testing_util::engine_with_blocks(*m.model, m.tok.get(), 10);
  ASSERT_NE(e, nullptr);
  std::vector<int32_t> a(60), b(80);
  for (int i = 0; i < 60; ++i) a[i] = 10 + i;
  for (int i = 0; i < 80; ++i) b[i] = 200 + i;
  const RequestId ia = *e->add_request(a, greedy(30));  // 4 blocks, growing to 6
  const RequestId ib = *e->add_request(b, greedy(30));  // 5 blocks, growing to 7
  auto first = e->step();
  ASSERT_TRUE(first.is_ok());
  ASSERT_EQ(first->size(), 1u);
  EXPECT_EQ((*first)[0].request, ia);
  EXPECT_EQ(e->stats().num_running, 1u) << "the second prompt would leave the first no block to grow into";
  EXPECT_EQ(e->stats().num_waiting, 1u);
  Outputs got = drain(*e);
  EXPECT_EQ((got[{ia, 0}].size()), 29u);
  EXPECT_EQ((got[{ib, 0}].size()), 30u);
  EXPECT_EQ(e->stats().preemptions, 0);
}

// Prefix cache statistics count as vLLM's do (every token of an admitted sequence is a
// query), once per admission: a request that waits for memory looks its prefix up at
// every step, but its hit is counted when it gets in.
TEST(Engine, PrefixStatsCountAWaitingRequestOnce) {
  ThreadPool pool(2);
  auto m = load_tiny(pool, "engine_prefix_stats");
  auto e = testing_util::engine_with_blocks(*m.model, m.tok.get(), 10);
  ASSERT_NE(e, nullptr);
  std::vector<int32_t> p(40), a(60), b;
  for (int i = 0; i < 40; ++i) p[i] = 400 + i;
  for (int i = 0; i < 60; ++i) a[i] = 10 + i;
  b = p;
  for (int i = 0; i < 40; ++i) b.push_back(200 + i);
  ASSERT_TRUE(e->add_request(p, greedy(8)).is_ok());
  drain(*e);  // its first 2 blocks (32 tokens) stay cached
  ASSERT_TRUE(e->add_request(a, greedy(30)).is_ok());
  ASSERT_TRUE(e->add_request(b, greedy(4)).is_ok());
  int waited = 0;
  while (e->has_work()) {
    ASSERT_TRUE(e->step().is_ok());
    waited += e->stats().num_waiting > 0 ? 1 : 0;
  }
  EXPECT_GT(waited, 3) << "the second request was meant to wait for the first";
  EXPECT_EQ(e->stats().prefix_query_tokens, 40 + 60 + 80);
  EXPECT_EQ(e->stats().prefix_hit_tokens, 32);
}

TEST(Engine, OutOfKvMemoryQueuesAndPreemptsButCompletesEveryRequest) {
  ThreadPool pool(2);
  auto m = load_tiny(pool, "engine_oom");
  auto e = testing_util::engine_with_blocks(*m.model, m.tok.get(), 10);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->max_model_len(), 160) << "one sequence alone must always fit in the pool";
  std::vector<RequestId> ids;
  std::vector<int32_t> prompt(60);
  for (int i = 0; i < 60; ++i) prompt[i] = 10 + i;
  for (int i = 0; i < 12; ++i) {
    prompt[0] = 10 + i;  // distinct prompts: no sharing to lean on
    ids.push_back(*e->add_request(prompt, greedy(50)));
  }
  std::map<RequestId, FinishReason> finish;
  Outputs got = drain(*e, &finish);
  for (RequestId id : ids) {
    EXPECT_EQ((got[{id, 0}].size()), 50u) << "request " << id;
    EXPECT_EQ(finish[id], FinishReason::kLength);
  }
  EXPECT_GT(e->stats().preemptions, 0);
  EXPECT_EQ(e->stats().used_blocks, 0);
}

TEST(Engine, SequenceStopsAtTheContextLimit) {
  ThreadPool pool(2);
  auto m = load_tiny(pool, "engine_ctx");
  EngineConfig c;
  c.max_model_len = 40;
  auto e = Engine::create(*m.model, m.tok.get(), c);
  ASSERT_TRUE(e.is_ok());
  const RequestId id = *(*e)->add_request(std::vector<int32_t>(30, 9), greedy(-1));
  std::map<RequestId, FinishReason> finish;
  Outputs got = drain(**e, &finish);
  EXPECT_EQ((got[{id, 0}].size()), 10u);
  EXPECT_EQ(finish[id], FinishReason::kLength);
}

TEST(Engine, BadRequestsAreRejectedWithAMessageAndQueueNothing) {
  ThreadPool pool(2);
  auto m = load_tiny(pool, "engine_bad");
  EngineConfig c;
  c.max_model_len = 32;
  auto e = Engine::create(*m.model, m.tok.get(), c);
  ASSERT_TRUE(e.is_ok());
  EXPECT_FALSE((*e)->add_request({}, greedy(4)).is_ok());
  EXPECT_FALSE((*e)->add_request({1, 2, 100000}, greedy(4)).is_ok());
  EXPECT_FALSE((*e)->add_request({1, -3}, greedy(4)).is_ok());
  auto too_long = (*e)->add_request(std::vector<int32_t>(32, 5), greedy(4));
  ASSERT_FALSE(too_long.is_ok());
  EXPECT_NE(too_long.status().message().find("context"), std::string::npos) << too_long.status().message();
  RequestParams bad_n = greedy(4);
  bad_n.n = 0;
  EXPECT_FALSE((*e)->add_request({1, 2}, bad_n).is_ok());
  EXPECT_FALSE((*e)->add_request({1, 2}, greedy(0)).is_ok());
  EXPECT_FALSE((*e)->has_work());
}

// check_request names the field at fault by its OpenAI name (what the server reports),
// and max_tokens_must_fit turns a completion that would outrun the context from a stop
// at the context's end into a rejection.
TEST(Engine, CheckRequestNamesTheFieldAndAddRequestAgrees) {
  ThreadPool pool(2);
  auto m = load_tiny(pool, "engine_check");
  EngineConfig c;
  c.max_model_len = 32;
  auto e = Engine::create(*m.model, m.tok.get(), c);
  ASSERT_TRUE(e.is_ok());
  auto param_of = [&](std::vector<int32_t> prompt, const RequestParams& p) {
    auto r = (*e)->check_request(prompt, p);
    EXPECT_EQ(r.has_value(), !(*e)->add_request(prompt, p).is_ok());
    return r ? r->param : std::string("ok");
  };
  EXPECT_EQ(param_of({}, greedy(4)), "prompt");
  EXPECT_EQ(param_of({1, 100000}, greedy(4)), "prompt");
  EXPECT_EQ(param_of(std::vector<int32_t>(32, 5), greedy(4)), "prompt");
  RequestParams p = greedy(4);
  p.n = 200;
  EXPECT_EQ(param_of({1, 2}, p), "n");
  p = greedy(4);
  p.logprobs = 21;
  EXPECT_EQ(param_of({1, 2}, p), "logprobs");
  // 30 + 4 > 32: stops at the context's end, unless the request asks for it to fit.
  p = greedy(4);
  EXPECT_EQ(param_of(std::vector<int32_t>(30, 5), p), "ok");
  p.max_tokens_must_fit = true;
  EXPECT_EQ(param_of(std::vector<int32_t>(30, 5), p), "max_tokens");
  auto r = (*e)->check_request(std::vector<int32_t>(30, 5), p);
  ASSERT_TRUE(r.has_value());
  EXPECT_NE(r->message.find("maximum context length is 32 tokens"), std::string::npos) << r->message;
  EXPECT_EQ(param_of(std::vector<int32_t>(28, 5), p), "ok");
}

TEST(Engine, AbortFreesTheRequestsBlocksWhereverItIs) {
  ThreadPool pool(2);
  auto m = load_tiny(pool, "engine_abort");
  EngineConfig c;
  c.scheduler.max_num_seqs = 2;
  auto e = Engine::create(*m.model, m.tok.get(), c);
  ASSERT_TRUE(e.is_ok());
  std::vector<RequestId> ids;
  for (int i = 0; i < 4; ++i) ids.push_back(*(*e)->add_request(std::vector<int32_t>(50, 20 + i), greedy(100)));
  for (int s = 0; s < 3; ++s) ASSERT_TRUE((*e)->step().is_ok());
  EXPECT_GT((*e)->stats().used_blocks, 0);
  EXPECT_TRUE((*e)->abort(ids[0]));  // running
  EXPECT_TRUE((*e)->abort(ids[3]));  // still waiting
  EXPECT_FALSE((*e)->abort(ids[3]));
  EXPECT_TRUE((*e)->abort(ids[1]));
  EXPECT_TRUE((*e)->abort(ids[2]));
  EXPECT_FALSE((*e)->has_work());
  EXPECT_EQ((*e)->stats().used_blocks, 0);
}

TEST(Engine, PriorityPolicyServesTheMostUrgentRequestFirst) {
  ThreadPool pool(2);
  auto m = load_tiny(pool, "engine_priority");
  EngineConfig c;
  c.scheduler.max_num_seqs = 1;
  c.scheduler.policy = SchedulePolicy::kPriority;
  auto e = Engine::create(*m.model, m.tok.get(), c);
  ASSERT_TRUE(e.is_ok());
  RequestParams low = greedy(3), high = greedy(3);
  low.priority = 5;
  high.priority = -1;
  const RequestId a = *(*e)->add_request({1, 2, 3}, low);
  const RequestId b = *(*e)->add_request({1, 2, 4}, low);
  const RequestId urgent = *(*e)->add_request({1, 2, 5}, high);
  std::vector<RequestId> order;
  while ((*e)->has_work()) {
    auto r = (*e)->step();
    ASSERT_TRUE(r.is_ok());
    for (const StepOutput& o : *r)
      if (o.finish != FinishReason::kNone) order.push_back(o.request);
  }
  EXPECT_EQ(order, (std::vector<RequestId>{urgent, a, b}));
}

TEST(Engine, LogprobsAreReportedWhenAsked) {
  ThreadPool pool(2);
  auto m = load_tiny(pool, "engine_logprobs");
  auto e = Engine::create(*m.model, m.tok.get(), EngineConfig{});
  ASSERT_TRUE(e.is_ok());
  RequestParams p = greedy(3);
  p.logprobs = 2;
  (void)*(*e)->add_request({1, 2, 3}, p);
  while ((*e)->has_work()) {
    auto r = (*e)->step();
    ASSERT_TRUE(r.is_ok());
    for (const StepOutput& o : *r) {
      ASSERT_EQ(o.top_logprobs.size(), 2u);
      EXPECT_EQ(o.top_logprobs[0].first, o.token) << "greedy picks the most likely token";
      EXPECT_FLOAT_EQ(o.top_logprobs[0].second, o.logprob);
      EXPECT_LE(o.logprob, 0.0f);
      EXPECT_GE(o.top_logprobs[0].second, o.top_logprobs[1].second);
    }
  }
}

}  // namespace
}  // namespace pagoda

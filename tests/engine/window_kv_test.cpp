// The engine on a model with sliding-window layers (a tiny random Gemma 3: 10 local
// layers with a window of 8 positions, 2 global), whose windowed layer groups release KV
// blocks as they leave the window (kv/kv_layout.h). The oracle is the contiguous
// single-sequence cache (model/kv_cache.h), which keeps every position of every layer:
// releasing blocks, sharing prefixes and preempting must change no token. As in
// engine_test.cpp, the batched exactness checks need the scalar kernels and run as the
// engine_exact_scalar ctest entry.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "engine/engine.h"
#include "engine_test_util.h"
#include "model/kv_cache.h"

namespace pagoda {
namespace {

using testing_util::drain;
using testing_util::greedy;
using testing_util::load_tiny;
using testing_util::Outputs;
using testing_util::TinyModel;

TinyModel load_windowed(ThreadPool& pool) {
  RandomModelSpec spec;
  spec.arch = "gemma3";
  spec.layers = 12;  // layers 5 and 11 global
  spec.sliding_window = 8;
  spec.seed = 11;
  return load_tiny(pool, "engine_window", spec);
}

// Greedy tokens through the contiguous cache, one sequence, nothing released.
std::vector<int32_t> greedy_contiguous(Model& m, const std::vector<int32_t>& prompt, int32_t n) {
  KvCache kv = m.make_cache(static_cast<int32_t>(prompt.size()) + n);
  std::vector<float> logits(static_cast<size_t>(m.config().n_vocab));
  EXPECT_TRUE(m.forward(prompt, 0, kv, logits.data()).is_ok());
  std::vector<int32_t> out;
  for (int32_t i = 0; i < n; ++i) {
    const int32_t tok = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    out.push_back(tok);
    if (i + 1 < n) {
      const int32_t pos = static_cast<int32_t>(prompt.size()) + i;
      EXPECT_TRUE(m.forward(std::vector<int32_t>{tok}, pos, kv, logits.data()).is_ok());
    }
  }
  return out;
}

std::vector<int32_t> prompt_of(int32_t n, int32_t seed) {
  std::vector<int32_t> p(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) p[i] = 3 + (i * 31 + seed * 17) % 500;
  return p;
}

TEST(EngineWindowKv, TheModelsLocalLayersGetGroupsOfTheirOwn) {
  ThreadPool pool(2);
  TinyModel m = load_windowed(pool);
  const KvLayout on = Engine::kv_shape(m.model->config(), EngineConfig{}).layout();
  EXPECT_EQ(on.n_groups(), 6);
  EXPECT_EQ(on.layers_per_block(), 2);
  EngineConfig off;
  off.window_kv_release = false;
  EXPECT_EQ(Engine::kv_shape(m.model->config(), off).layout().n_groups(), 1);
}

// One long request, step by step, with and without releasing: the same tokens, and the
// releasing engine ends up holding a fraction of the KV bytes. For both KV row types.
TEST(EngineWindowKv, ReleasingWindowBlocksChangesNoTokenAndHoldsAWindow) {
  ThreadPool pool(2);
  TinyModel m = load_windowed(pool);
  const std::vector<int32_t> prompt = prompt_of(100, 1);
  for (KvType type : {KvType::kF16, KvType::kI8}) {
    SCOPED_TRACE(kv_type_name(type));
    size_t peak_bytes[2] = {0, 0};
    std::vector<int32_t> tokens[2];
    for (int release = 0; release < 2; ++release) {
      EngineConfig c;
      c.kv_type = type;
      c.window_kv_release = release == 1;
      c.kv_cache_bytes = 16ull << 20;
      auto e = Engine::create(*m.model, m.tok.get(), c);
      ASSERT_TRUE(e.is_ok());
      const size_t block_bytes = KvStorage::bytes_per_block(Engine::kv_shape(m.model->config(), c));
      ASSERT_TRUE((*e)->add_request(prompt, greedy(200)).is_ok());
      for (int step = 0; (*e)->has_work(); ++step) {
        auto r = (*e)->step();
        ASSERT_TRUE(r.is_ok()) << r.status().message();
        // The decode steps: the prefill holds all of its 100 positions while it runs.
        if (step > 0)
          peak_bytes[release] =
              std::max(peak_bytes[release], static_cast<size_t>((*e)->stats().used_blocks) * block_bytes);
        for (const StepOutput& o : *r) tokens[release].push_back(o.token);
      }
      EXPECT_EQ((*e)->stats().used_blocks, 0);
    }
    EXPECT_EQ(tokens[0], tokens[1]);
    ASSERT_EQ(tokens[1].size(), 200u);
    // Up to 300 positions: 19 blocks of 16 in the global group; at most 2 blocks in each
    // local one (8 positions of window plus the one computed, across a block edge).
    const size_t layer_block = peak_bytes[0] / (19 * 12);
    EXPECT_EQ(peak_bytes[0], 19u * 12u * layer_block);
    EXPECT_LE(peak_bytes[1], (19u + 5u * 2u) * 2u * layer_block);
  }
}

// Static batching prefills a prompt whole, so its windowed groups hold every prompt
// block for that step: the longest request the pool admits is sized for that, and one
// that long runs instead of waiting forever.
TEST(EngineWindowKv, StaticBatchingAdmitsTheLongestRequestThePoolHolds) {
  ThreadPool pool(2);
  TinyModel m = load_windowed(pool);
  EngineConfig c;
  c.scheduler.mode = ScheduleMode::kStatic;
  c.scheduler.max_num_batched_tokens = 16;  // would allow 720 positions if prompts came in chunks
  const int32_t groups = Engine::kv_shape(m.model->config(), c).layout().n_groups();
  auto e = testing_util::engine_with_blocks(*m.model, m.tok.get(), 10 * groups, c);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->max_model_len(), 160);
  const RequestId id = *e->add_request(prompt_of(150, 4), greedy(10));
  Outputs got = drain(*e);
  EXPECT_EQ((got[{id, 0}].size()), 10u);
  EXPECT_EQ(e->stats().used_blocks, 0);
}

TEST(EngineWindowKv, LongRequestMatchesTheContiguousCache) {
  REQUIRE_EXACT_BATCHING();
  ThreadPool pool(2);
  TinyModel m = load_windowed(pool);
  const std::vector<int32_t> prompt = prompt_of(150, 2);
  EngineConfig c;
  c.scheduler.max_num_batched_tokens = 40;  // the prompt in chunks, each reading the last window
  auto e = Engine::create(*m.model, m.tok.get(), c);
  ASSERT_TRUE(e.is_ok());
  const RequestId id = *(*e)->add_request(prompt, greedy(60));
  Outputs got = drain(**e);
  EXPECT_EQ((got[{id, 0}]), greedy_contiguous(*m.model, prompt, 60));
}

// The mixed workload of engine_test.cpp (shared prefixes, chunked prefill, preemption)
// with longer outputs, in a pool of 10 blocks per layer group.
TEST(EngineWindowKv, MixedWorkloadUnderMemoryPressureMatchesTheContiguousCache) {
  REQUIRE_EXACT_BATCHING();
  ThreadPool pool(2);
  TinyModel m = load_windowed(pool);
  testing_util::Workload w = testing_util::mixed_workload(32, m.model->config().n_vocab, 5);
  // Every output 100 tokens longer than there: a local group's blocks are released as
  // fast as they are taken, so only the global group's growth runs the pool dry.
  for (int32_t& n : w.max_tokens) n += 100;
  EngineConfig c;
  c.scheduler.max_num_seqs = 16;
  c.scheduler.max_num_batched_tokens = 64;
  const KvShape shape = Engine::kv_shape(m.model->config(), c);
  c.kv_cache_bytes = KvStorage::bytes_per_block(shape) * 10 * static_cast<size_t>(shape.layout().n_groups());
  auto e = Engine::create(*m.model, m.tok.get(), c);
  ASSERT_TRUE(e.is_ok());
  std::vector<RequestId> ids;
  for (size_t i = 0; i < w.prompts.size(); ++i)
    ids.push_back(*(*e)->add_request(w.prompts[i], greedy(w.max_tokens[i])));
  Outputs got = drain(**e);
  const EngineStats st = (*e)->stats();
  EXPECT_GT(st.preemptions, 0) << "the workload was meant to run out of KV blocks";
  EXPECT_GT(st.prefix_hit_tokens, 0) << "the shared prefix was meant to hit the cache";
  EXPECT_EQ(st.used_blocks, 0);
  for (size_t i = 0; i < ids.size(); ++i)
    EXPECT_EQ((got[{ids[i], 0}]), greedy_contiguous(*m.model, w.prompts[i], w.max_tokens[i]))
        << "request " << i << " (prompt " << w.prompts[i].size() << " tokens)";
}

TEST(EngineWindowKv, CachedPrefixPastTheWindowIsReusedAndChangesNothing) {
  REQUIRE_EXACT_BATCHING();
  ThreadPool pool(2);
  TinyModel m = load_windowed(pool);
  const std::vector<int32_t> a = prompt_of(100, 3);
  std::vector<int32_t> b(a.begin(), a.begin() + 90);
  b.push_back(77);
  auto e = Engine::create(*m.model, m.tok.get(), EngineConfig{});
  ASSERT_TRUE(e.is_ok());
  const testing_util::ReuseRun got = testing_util::run_then_reuse(**e, a, b, 8);
  // 5 full blocks of 16 are shared; the local layers need only block 4 (positions 73-79,
  // the window before position 80), which the first request released while it decoded.
  EXPECT_EQ(got.b_cached, 80);
  EXPECT_EQ(got.a, greedy_contiguous(*m.model, a, 8));
  EXPECT_EQ(got.b, greedy_contiguous(*m.model, b, 8));
}

}  // namespace
}  // namespace pagoda

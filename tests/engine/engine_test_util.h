// Shared by the engine tests: a tiny random model on disk, and drivers that run a set of
// requests through an engine to completion, collecting each sample's tokens.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <random>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/engine.h"
#include "gguf/gguf_file.h"
#include "kernels/simd/simd_target.h"
#include "model/random_model.h"

namespace pagoda::testing_util {

struct TinyModel {
  std::unique_ptr<GgufFile> file;
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tok;
};

inline TinyModel load_tiny(ThreadPool& pool, const std::string& name, RandomModelSpec spec = {}) {
  const auto path = (std::filesystem::temp_directory_path() / ("pagoda_" + name + ".gguf")).string();
  EXPECT_TRUE(write_random_model(spec, path).is_ok());
  TinyModel l;
  auto f = GgufFile::open(path);
  EXPECT_TRUE(f.is_ok());
  l.file = std::make_unique<GgufFile>(std::move(f.value()));
  auto m = Model::load(*l.file, pool);
  EXPECT_TRUE(m.is_ok()) << m.status().message();
  l.model = std::move(m.value());
  auto t = Tokenizer::from_gguf(*l.file);
  EXPECT_TRUE(t.is_ok());
  l.tok = std::move(t.value());
  return l;
}

using Outputs = std::map<std::pair<RequestId, int32_t>, std::vector<int32_t>>;

// Steps the engine until it has no work, collecting tokens per (request, sample); fails
// the test if a step errs or the engine stops making progress.
// Bit-exact batched outputs need kernels whose per-token results do not depend on the
// batch: the scalar target (ctest runs the engine tests again with PAGODA_CPU=scalar).
inline bool exact_batching() { return best_simd_target() == SimdTarget::kScalar; }
#define REQUIRE_EXACT_BATCHING()                                                                       \
  if (!::pagoda::testing_util::exact_batching())                                                     \
  GTEST_SKIP() << "bit-exact batched outputs need the scalar kernels; ctest runs this test again as " \
                  "the engine_exact_scalar entry with PAGODA_CPU=scalar"

inline Outputs drain(Engine& e, std::map<RequestId, FinishReason>* finish = nullptr) {
  Outputs out;
  int idle = 0;
  while (e.has_work()) {
    auto r = e.step();
    EXPECT_TRUE(r.is_ok()) << r.status().message();
    if (!r.is_ok()) break;
    if (r->empty() && ++idle > 3) {
      ADD_FAILURE() << "the engine has work but schedules nothing";
      break;
    }
    for (const StepOutput& o : *r) {
      if (o.token >= 0) out[{o.request, o.index}].push_back(o.token);
      if (finish != nullptr && o.finish != FinishReason::kNone) (*finish)[o.request] = o.finish;
    }
  }
  return out;
}

// One request through a fresh, roomy engine of its own.
inline std::vector<int32_t> run_alone(Model& m, const Tokenizer* tok, const std::vector<int32_t>& prompt,
                                      const RequestParams& p) {
  EngineConfig c;
  c.kv_cache_bytes = 64ull << 20;
  auto e = Engine::create(m, tok, c);
  EXPECT_TRUE(e.is_ok());
  auto id = (*e)->add_request(prompt, p);
  EXPECT_TRUE(id.is_ok());
  Outputs o = drain(**e);
  return o[{*id, 0}];
}

// An engine whose KV pool holds exactly `blocks` blocks; null (and a test failure) when it
// cannot be created.
inline std::unique_ptr<Engine> engine_with_blocks(Model& m, const Tokenizer* tok, int32_t blocks,
                                                  EngineConfig c = {}) {
  c.kv_cache_bytes = KvStorage::bytes_per_block(Engine::kv_shape(m.config(), c)) * static_cast<size_t>(blocks);
  auto e = Engine::create(m, tok, c);
  EXPECT_TRUE(e.is_ok()) << e.status().message();
  return e.is_ok() ? std::move(e.value()) : nullptr;
}

struct Workload {
  std::vector<std::vector<int32_t>> prompts;
  std::vector<int32_t> max_tokens;
};

// Mixed lengths; a third of the prompts start with the same 40 tokens, and one request in
// eight generates 100 tokens more, growing by several blocks after it was admitted (the
// scheduler keeps a block of headroom per running sequence, which shorter ones never
// outgrow, so these are what run the pool dry and preempt).
inline Workload mixed_workload(int n, int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> tok(3, vocab - 1), len(1, 90), out(4, 40);
  std::vector<int32_t> shared(40);
  for (int32_t& t : shared) t = tok(rng);
  Workload w;
  for (int i = 0; i < n; ++i) {
    std::vector<int32_t> p;
    if (i % 3 == 0) p = shared;
    const int extra = len(rng);
    for (int k = 0; k < extra; ++k) p.push_back(tok(rng));
    w.prompts.push_back(p);
    w.max_tokens.push_back(out(rng) + (i % 8 == 5 ? 100 : 0));
  }
  return w;
}

inline RequestParams greedy(int32_t max_tokens) {
  RequestParams p;
  p.sampling.temperature = 0.0f;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  return p;
}

// Request a to the end, then request b on the same engine: each one's tokens, and how
// many of b's prompt tokens came from the prefix cache.
struct ReuseRun {
  std::vector<int32_t> a, b;
  int32_t b_cached = -1;
};
inline ReuseRun run_then_reuse(Engine& e, const std::vector<int32_t>& a, const std::vector<int32_t>& b,
                               int32_t max_tokens) {
  ReuseRun out;
  const auto ia = e.add_request(a, greedy(max_tokens));
  EXPECT_TRUE(ia.is_ok());
  out.a = drain(e)[{*ia, 0}];
  const auto ib = e.add_request(b, greedy(max_tokens));
  EXPECT_TRUE(ib.is_ok());
  while (e.has_work()) {
    auto r = e.step();
    EXPECT_TRUE(r.is_ok());
    if (!r.is_ok()) break;
    for (const StepOutput& o : *r) {
      out.b.push_back(o.token);
      out.b_cached = o.cached_prompt_tokens;
    }
  }
  return out;
}

// A prompt of n token ids in the small generated vocabularies, varied by salt.
inline std::vector<int32_t> prompt_of(int32_t n, int32_t salt = 0) {
  std::vector<int32_t> p;
  for (int32_t i = 0; i < n; ++i) p.push_back(3 + (i * 37 + salt * 11) % 250);
  return p;
}

// Runs every request to its end; the pooled vector of each embedding (or rank) request,
// by id. Such a request ends at once with a stop and no token.
inline std::map<RequestId, std::vector<float>> embeddings(Engine& e) {
  std::map<RequestId, std::vector<float>> out;
  for (int guard = 0; e.has_work() && guard < 10000; ++guard) {
    auto r = e.step();
    EXPECT_TRUE(r.is_ok()) << r.status().message();
    if (!r.is_ok()) break;
    for (StepOutput& o : *r)
      if (!o.embedding.empty()) {
        EXPECT_EQ(o.token, -1);
        EXPECT_EQ(o.finish, FinishReason::kStop);
        out[o.request] = std::move(o.embedding);
      }
  }
  EXPECT_FALSE(e.has_work());
  return out;
}

}  // namespace pagoda::testing_util

// attention_causal per body (scalar, avx2, avx512) on model shapes, one thread:
//   attn_decode/<shape>/<ctx>/<body>    one token at position ctx - 1
//   attn_prefill/<shape>/<n>/<body>     n tokens from position 0 (the causal triangle)
//   attn_prefill_at3584/<shape>/<n>/<body>  the 8th 512-token chunk of a 4096-token prompt
// Shapes: llama1b (32 heads, 8 KV heads, head_dim 64), gemma270m (4 / 1 / 256),
// llama8b (32 / 8 / 128), gemma2-2b (8 / 4 / 256, scores soft-capped at 50, and
// gemma2-2b-nocap without the cap: the cap's cost). items_per_second counts scores (query
// heads x keys).
// Run e.g. bin/pagoda-microbench --benchmark_filter=attn_
#include <benchmark/benchmark.h>

#include <random>
#include <string>
#include <vector>

#include "base/fp16.h"
#include "kernels/attention/attention_kernels.h"

namespace pagoda {
namespace {

struct Shape {
  const char* name;
  int32_t heads, kv_heads, head_dim;
  float softcap = 0.0f;
};

constexpr Shape kShapes[] = {{"llama1b", 32, 8, 64},        {"gemma270m", 4, 1, 256},
                             {"llama8b", 32, 8, 128},       {"gemma2-2b", 8, 4, 256, 50.0f},
                             {"gemma2-2b-nocap", 8, 4, 256}};

void bm_attention(benchmark::State& state, Shape s, attn::Body body, int32_t pos0, int64_t n_tokens) {
  const int32_t total = pos0 + static_cast<int32_t>(n_tokens);
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> q(n_tokens * s.heads * s.head_dim), out(q.size());
  for (float& x : q) x = nd(rng);
  std::vector<uint16_t> k(static_cast<size_t>(total) * s.kv_heads * s.head_dim), v(k.size());
  for (auto& x : k) x = fp32_to_fp16(nd(rng));
  for (auto& x : v) x = fp32_to_fp16(nd(rng));
  AttentionParams p{s.heads, s.kv_heads, s.head_dim, 0.125f, 0, s.softcap};
  ThreadPool pool(1);
  for (auto _ : state) {
    attn::run(body, q.data(), n_tokens, pos0, k.data(), v.data(), p, out.data(), pool);
    benchmark::DoNotOptimize(out.data());
  }
  // Scores computed: sum over tokens of visible keys, times heads.
  const double keys = static_cast<double>(n_tokens) * pos0 + static_cast<double>(n_tokens) * (n_tokens + 1) / 2;
  state.SetItemsProcessed(static_cast<int64_t>(static_cast<double>(state.iterations()) * keys * s.heads));
}

int register_all() {
  for (const Shape& s : kShapes) {
    std::vector<std::pair<std::string, attn::Body>> bodies;
    for (SimdTarget t : runnable_simd_targets()) bodies.emplace_back(simd_target_name(t), attn::body_for(t, s.head_dim));
    for (const auto& [bname, body] : bodies) {
      for (int32_t ctx : {512, 4096}) {
        const std::string name = std::string("attn_decode/") + s.name + "/" + std::to_string(ctx) + "/" + bname;
        benchmark::RegisterBenchmark(name.c_str(), bm_attention, s, body, ctx - 1, 1);
      }
      const std::string name = std::string("attn_prefill/") + s.name + "/512/" + bname;
      benchmark::RegisterBenchmark(name.c_str(), bm_attention, s, body, 0, 512)->Unit(benchmark::kMillisecond);
      const std::string late = std::string("attn_prefill_at3584/") + s.name + "/512/" + bname;
      benchmark::RegisterBenchmark(late.c_str(), bm_attention, s, body, 3584, 512)->Unit(benchmark::kMillisecond);
    }
  }
  return 0;
}

const int kRegistered = register_all();

}  // namespace
}  // namespace pagoda

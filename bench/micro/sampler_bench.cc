// The sampler on Gemma's 262,144-token vocabulary, with logits shaped like a model's (a
// broad bulk and a few standouts) and a 512-token history for the repetition penalty:
//   sampler/<chain>   time per sampled token, logits copied in outside the timing.
// Run e.g. bin/pagoda-microbench --benchmark_filter=sampler/
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "sampling/sampler.h"

namespace pagoda {
namespace {

constexpr size_t kVocab = 262144;

struct ModelLikeLogits {
  std::vector<float> logits;
  std::vector<int32_t> history;
  ModelLikeLogits() : logits(kVocab), history(512) {
    std::mt19937 rng(1);
    std::normal_distribution<float> normal(0.0f, 2.0f);
    for (float& l : logits) l = normal(rng);
    for (int i = 0; i < 20; ++i) logits[rng() % kVocab] += 12.0f;
    for (int32_t& t : history) t = static_cast<int32_t>(rng() % kVocab);
  }
};

void bm_sample(benchmark::State& state, SamplingParams params) {
  static const ModelLikeLogits data;
  Sampler sampler(params);
  std::vector<float> logits(kVocab);
  for (auto _ : state) {
    state.PauseTiming();
    logits = data.logits;
    state.ResumeTiming();
    benchmark::DoNotOptimize(sampler.sample(logits, data.history));
  }
}

SamplingParams with_defaults() {
  SamplingParams p;
  p.seed = 1;
  p.repeat_penalty = 1.1f;
  return p;
}

SamplingParams chain(int top_k, float top_p, float min_p, float temperature) {
  SamplingParams p = with_defaults();
  p.top_k = top_k;
  p.top_p = top_p;
  p.min_p = min_p;
  p.temperature = temperature;
  return p;
}

BENCHMARK_CAPTURE(bm_sample, defaults_topk40_topp95_minp05, with_defaults());
BENCHMARK_CAPTURE(bm_sample, topp95_minp05_no_topk, chain(0, 0.95f, 0.05f, 0.8f));
BENCHMARK_CAPTURE(bm_sample, topp95_only, chain(0, 0.95f, 0.0f, 0.8f));
BENCHMARK_CAPTURE(bm_sample, full_softmax, chain(0, 1.0f, 0.0f, 1.0f));
BENCHMARK_CAPTURE(bm_sample, greedy, chain(40, 0.95f, 0.05f, 0.0f));

}  // namespace
}  // namespace pagoda

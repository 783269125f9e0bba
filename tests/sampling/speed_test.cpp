#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include "sampling/reference_chain.h"
#include "sampling/sampler.h"

namespace pagoda {
namespace {

// Gemma's vocabulary, with logits shaped like a model's: a broad bulk and a few
// standouts. Prints the median time per call (the median, because a shared machine's
// outliers swamp a mean); machines vary too much to assert it.
TEST(Speed, SamplesA262kVocabulary) {
  constexpr size_t kVocab = 262144;
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> base(kVocab);
  for (float& l : base) l = normal(rng);
  for (int i = 0; i < 20; ++i) base[rng() % kVocab] += 12.0f;
  std::vector<int32_t> history(512);
  for (int32_t& t : history) t = static_cast<int32_t>(rng() % kVocab);

  struct Case {
    const char* name;
    SamplingParams params;
  };
  SamplingParams defaults;
  defaults.seed = 1;
  defaults.repeat_penalty = 1.1f;
  SamplingParams no_top_k = defaults;
  no_top_k.top_k = 0;
  SamplingParams top_p_only = no_top_k;
  top_p_only.min_p = 0.0f;
  SamplingParams all_off = testing::plain_params(1);
  SamplingParams greedy = defaults;
  greedy.temperature = 0.0f;
  const Case cases[] = {{"defaults (top-k 40, top-p .95, min-p .05)", defaults},
                        {"top-p .95 + min-p .05, no top-k", no_top_k},
                        {"top-p .95 only", top_p_only},
                        {"no filters (full softmax)", all_off},
                        {"greedy", greedy}};
  std::vector<float> logits(kVocab);
  for (const Case& c : cases) {
    Sampler sampler(c.params);
    std::vector<double> us;
    for (int i = 0; i < 51; ++i) {
      logits = base;
      const auto start = std::chrono::steady_clock::now();
      const int32_t token = sampler.sample(logits, history);
      const auto end = std::chrono::steady_clock::now();
      ASSERT_GE(token, 0);
      us.push_back(std::chrono::duration<double, std::micro>(end - start).count());
    }
    std::nth_element(us.begin(), us.begin() + 25, us.end());
    std::printf("%-44s %8.1f us per token\n", c.name, us[25]);
  }
}

}  // namespace
}  // namespace pagoda

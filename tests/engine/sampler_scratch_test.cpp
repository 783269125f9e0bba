// The engine samples every sequence with its thread's working space (engine.h), not the
// Sampler's own, so that thousands of sequences do not each hold a vocabulary-sized row
// (issue 22). The draws must not depend on which scratch a Sampler is handed, on every
// path of the chain, even when samplers of different settings take turns on one scratch.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "sampling/sampler.h"
#include "sampling/scratch.h"

namespace pagoda {
namespace {

std::vector<float> random_logits(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, 3.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

TEST(SamplerScratch, DrawsDoNotDependOnWhoseScratch) {
  std::vector<SamplingParams> settings(4);
  settings[0].top_k = 0, settings[0].top_p = 1.0f, settings[0].min_p = 0.0f;  // whole vocabulary
  settings[1].top_k = 0, settings[1].top_p = 0.9f, settings[1].min_p = 0.0f;  // nucleus over the vocabulary
  settings[2].top_k = 0, settings[2].top_p = 0.95f, settings[2].min_p = 0.01f;
  settings[3].top_k = 40;                                                   // llama.cpp's defaults
  const std::vector<int32_t> history = {1, 2, 3, 5, 8};
  for (size_t i = 0; i < settings.size(); ++i) settings[i].seed = 100 + i;
  std::vector<Sampler> own, shared;
  for (const SamplingParams& p : settings) {
    own.emplace_back(p);
    shared.emplace_back(p);
  }
  SamplerScratch one;  // taken in turn by every shared sampler
  for (int step = 0; step < 20; ++step) {
    for (size_t i = 0; i < settings.size(); ++i) {
      const std::vector<float> logits = random_logits(50'000, static_cast<uint64_t>(step * 31 + i));
      std::vector<float> a = logits, b = logits;
      EXPECT_EQ(own[i].sample(a, history), shared[i].sample(b, history, one)) << "settings " << i << " step " << step;
    }
  }
}

}  // namespace
}  // namespace pagoda

// Turning logits into the next token. Order of the pipeline (as llama.cpp's default
// chain): repetition/presence/frequency penalties over recent tokens, then top-k,
// top-p, min-p, temperature, and a draw from the per-sampler seeded RNG. Temperature
// <= 0 means greedy (argmax, ties to the lowest id). One Sampler per sequence; not
// thread-safe.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace pagoda {

struct SamplingParams {
  float temperature = 0.8f;
  int32_t top_k = 40;          // <= 0: off
  float top_p = 0.95f;         // >= 1: off
  float min_p = 0.05f;         // <= 0: off
  float repeat_penalty = 1.0f; // 1: off (llama.cpp semantics: divide positive logits)
  int32_t repeat_last_n = 64;  // window for the penalties; -1 = whole history
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  uint64_t seed = 0xFFFFFFFFu; // 0xFFFFFFFF: random seed
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);

  // Picks the next token. `logits` is modified in place (penalties, scaling).
  // `history` is the sequence so far (prompt + generated) for the penalties.
  int32_t sample(std::span<float> logits, std::span<const int32_t> history);

  const SamplingParams& params() const { return params_; }
  uint64_t seed() const { return seed_; }

  // Probabilities after the whole pipeline, for the tests of the distribution: returns
  // (token, probability) pairs of every candidate that survives the filters.
  std::vector<std::pair<int32_t, float>> distribution(std::span<float> logits,
                                                      std::span<const int32_t> history) const;

 private:
  SamplingParams params_;
  uint64_t seed_;
  std::mt19937_64 rng_;
};

int32_t argmax(std::span<const float> logits);

}  // namespace pagoda

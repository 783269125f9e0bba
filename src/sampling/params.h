// The knobs of the sampler chain, with llama.cpp's defaults and meanings so that the
// same flags give the same behaviour. Plain data; copied into each Sampler.
#pragma once

#include <cstdint>

namespace pagoda {

struct SamplingParams {
  float temperature = 0.8f;    // <= 0: greedy (argmax, ties to the lowest id)
  int32_t top_k = 40;          // <= 0 or >= vocabulary size: off
  float top_p = 0.95f;         // >= 1: off
  float min_p = 0.05f;         // <= 0: off
  float repeat_penalty = 1.0f; // 1: off (llama.cpp semantics: divide positive logits)
  int32_t repeat_last_n = 64;  // window for all three penalties; 0 = off, -1 = whole history
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  uint64_t seed = 0xFFFFFFFFu; // 0xFFFFFFFF: random seed
};

inline constexpr uint64_t kRandomSeed = 0xFFFFFFFFu;

}  // namespace pagoda

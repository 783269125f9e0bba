// The sampler chain as two steps: run_chain applies penalties and the filters and says
// which tokens survive; draw_token softmaxes the survivors at the temperature and picks
// one. Sampler::sample and Sampler::distribution are both built from these, so the
// distribution the tests measure is the one sampling draws from.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "sampling/candidates.h"
#include "sampling/params.h"
#include "sampling/scratch.h"

namespace pagoda {

struct Survivors {
  // Set when no draw is needed: greedy decoding, no finite logit (then the lowest id),
  // or an empty vocabulary (-1).
  std::optional<int32_t> decided;
  // With every filter off the survivors are the whole vocabulary (minus -inf logits);
  // listing 262k tokens would cost more than the draw itself.
  bool whole_vocab = false;
  std::span<const TokenLogit> tokens;  // otherwise, in no particular order
  float max = 0;                       // the best logit, the softmax's shift
};

// Applies the penalties to `logits` in place, then top-k, top-p and min-p. The result
// points into `scratch` and `logits`, valid until either changes.
Survivors run_chain(std::span<float> logits, std::span<const int32_t> history,
                    const SamplingParams& params, SamplerScratch& scratch);

// Picks a survivor with probability softmax(logit / temperature), `u` uniform in [0, 1).
int32_t draw_token(const Survivors& survivors, std::span<const float> logits,
                   float temperature, double u, SamplerScratch& scratch);

// The probabilities draw_token uses, as (token, probability) pairs.
std::vector<std::pair<int32_t, float>> survivor_probabilities(const Survivors& survivors,
                                                              std::span<const float> logits,
                                                              float temperature,
                                                              SamplerScratch& scratch);

}  // namespace pagoda

// Repetition, frequency and presence penalties: the first stage of the chain, and the
// only one that depends on the sequence's history rather than on the logits alone.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sampling/params.h"

namespace pagoda {

// For every distinct token among the last `repeat_last_n` entries of `history` (all of
// it for -1, none for 0), seen `count` times:
//   repeat_penalty (llama.cpp): a positive logit is divided by it, a negative one
//     multiplied, so the token always becomes less likely;
//   then, as OpenAI: logit -= count * frequency_penalty + presence_penalty.
// Tokens outside [0, logits.size()) are ignored. `scratch` is working space reused
// across calls. Cost: O(n log n) in the window length, independent of the vocabulary.
void apply_penalties(std::span<float> logits, std::span<const int32_t> history,
                     const SamplingParams& params, std::vector<int32_t>& scratch);

}  // namespace pagoda

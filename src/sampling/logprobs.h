// Log-probabilities for the API's `logprobs` option: the log-softmax of the model's raw
// logits (before penalties, filters and temperature), as OpenAI reports them.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace pagoda {

// log(sum_i e^logits[i]), computed stably; -inf when every logit is -inf or the span is
// empty. A token's log-probability is logits[token] minus this.
double log_sum_exp(std::span<const float> logits);

// The n most likely tokens and their log-probabilities, most likely first (ties to the
// lowest id); fewer when fewer logits are finite. One pass for the normalizer, one for
// the selection; no sort of the vocabulary.
std::vector<std::pair<int32_t, float>> top_logprobs(std::span<const float> logits, int n);

}  // namespace pagoda

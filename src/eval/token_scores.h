// Quality measurement (`pagoda perplexity`): what one row of a model's logits says about
// the next token. A row is a whole vocabulary (Gemma's 262,144 entries), so each function
// is a few linear passes over a row in cache; the normalizer is the kernels'
// log_sum_exp_row (vector exp within an ulp, summed in double), good to about 1e-6.
#pragma once

#include <cstdint>
#include <span>

namespace pagoda {

struct RowSummary {
  double log_norm = 0;  // log sum_i e^logits[i]; -inf when every logit is -inf
  int32_t argmax = 0;   // the most likely token; ties go to the lowest id
};

// Both at once; NaN logits make log_norm NaN (the argmax is then meaningless).
RowSummary summarize_row(std::span<const float> logits);

// -log softmax(logits)[token], given the row's log_norm (summarize_row).
inline double token_nll(std::span<const float> logits, int32_t token, double log_norm) {
  return log_norm - static_cast<double>(logits[static_cast<size_t>(token)]);
}

// out[i] = log softmax(logits)[i]; out must hold logits.size() entries.
void log_softmax(std::span<const float> logits, std::span<float> out);

}  // namespace pagoda

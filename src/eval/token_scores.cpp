#include "eval/token_scores.h"

#include <cmath>
#include <limits>

#include "kernels/elementwise/elementwise.h"

namespace pagoda {

RowSummary summarize_row(std::span<const float> logits) {
  RowSummary s;
  s.log_norm = log_sum_exp_row(logits.data(), static_cast<int64_t>(logits.size()), &s.argmax);
  return s;
}

void log_softmax(std::span<const float> logits, std::span<float> out) {
  const double norm = summarize_row(logits).log_norm;
  for (size_t i = 0; i < logits.size(); ++i) out[i] = static_cast<float>(static_cast<double>(logits[i]) - norm);
}

}  // namespace pagoda

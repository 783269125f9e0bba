#include "eval/token_scores.h"

#include <cmath>
#include <limits>

#include "sampling/fast_exp.h"

namespace pagoda {

RowSummary summarize_row(std::span<const float> logits) {
  RowSummary s;
  float best = -std::numeric_limits<float>::infinity();
  bool nan = false;
  for (size_t i = 0; i < logits.size(); ++i) {
    const float v = logits[i];
    if (v > best) {
      best = v;
      s.argmax = static_cast<int32_t>(i);
    }
    nan |= std::isnan(v);
  }
  if (nan) {
    s.log_norm = std::numeric_limits<double>::quiet_NaN();
  } else if (!(best > -std::numeric_limits<float>::infinity())) {
    s.log_norm = -std::numeric_limits<double>::infinity();
  } else {
    s.log_norm = static_cast<double>(best) + std::log(sum_exp(logits, best, 1.0f));
  }
  return s;
}

void log_softmax(std::span<const float> logits, std::span<float> out) {
  const double norm = summarize_row(logits).log_norm;
  for (size_t i = 0; i < logits.size(); ++i) out[i] = static_cast<float>(static_cast<double>(logits[i]) - norm);
}

}  // namespace pagoda

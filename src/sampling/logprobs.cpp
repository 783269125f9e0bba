#include "sampling/logprobs.h"

#include <cmath>
#include <limits>

#include "sampling/candidates.h"
#include "sampling/fast_exp.h"

namespace pagoda {

double log_sum_exp(std::span<const float> logits) {
  const float max = max_logit(logits);
  if (!(max > -std::numeric_limits<float>::infinity())) {
    return -std::numeric_limits<double>::infinity();
  }
  return max + std::log(sum_exp(logits, max, 1.0f));
}

std::vector<std::pair<int32_t, float>> top_logprobs(std::span<const float> logits, int n) {
  std::vector<std::pair<int32_t, float>> out;
  if (n <= 0 || logits.empty()) return out;
  std::vector<TokenLogit> best;
  const size_t count = select_top_k(logits, static_cast<size_t>(n), best);
  const double norm = log_sum_exp(logits);
  out.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    out.emplace_back(best[i].id, static_cast<float>(best[i].logit - norm));
  }
  return out;
}

}  // namespace pagoda

#include <algorithm>
#include <cmath>
#include <limits>

#include "sampling/chain.h"
#include "sampling/fast_exp.h"

namespace pagoda {
namespace {

// Unnormalized probabilities of the survivors at the temperature; they all sit at or
// below the shift, so the exponent is never positive.
double list_weights(std::span<const TokenLogit> tokens, float max, float inv_temp,
                    std::vector<float>& w) {
  if (w.size() < tokens.size()) w.resize(tokens.size());
  double total = 0;
  for (size_t i = 0; i < tokens.size(); ++i) {
    w[i] = exp_nonpositive((tokens[i].logit - max) * inv_temp);
    total += w[i];
  }
  return total;
}

double vocab_weights(std::span<const float> logits, float max, float inv_temp,
                     SamplerScratch& s) {
  const size_t n_blocks = (logits.size() + kExpBlock - 1) / kExpBlock;
  if (s.weights.size() < logits.size()) s.weights.resize(logits.size());
  if (s.block_sums.size() < n_blocks) s.block_sums.resize(n_blocks);
  return exp_terms(logits, max, inv_temp, s.weights.data(), s.block_sums.data());
}

// The index where the running sum of w first passes target; rounding can leave target
// just past the end, and then the last index with weight wins.
size_t walk(const float* w, size_t n, double target) {
  size_t last = 0;
  for (size_t i = 0; i < n; ++i) {
    if (w[i] <= 0) continue;
    last = i;
    target -= w[i];
    if (target < 0) return i;
  }
  return last;
}

}  // namespace

int32_t draw_token(const Survivors& survivors, std::span<const float> logits,
                   float temperature, double u, SamplerScratch& scratch) {
  if (survivors.decided) return *survivors.decided;
  const float inv_temp = 1.0f / temperature;
  if (!survivors.whole_vocab) {
    const auto tokens = survivors.tokens;
    const double total = list_weights(tokens, survivors.max, inv_temp, scratch.weights);
    return tokens[walk(scratch.weights.data(), tokens.size(), u * total)].id;
  }
  const double total = vocab_weights(logits, survivors.max, inv_temp, scratch);
  // Skip whole blocks by their sums, then walk inside one: 1k steps, not 262k.
  double target = u * total;
  const size_t n_blocks = (logits.size() + kExpBlock - 1) / kExpBlock;
  size_t b = 0;
  for (; b + 1 < n_blocks; ++b) {
    if (target < scratch.block_sums[b]) break;
    target -= scratch.block_sums[b];
  }
  // Rounding can strand target in a block of zeros; step back to one with weight.
  while (b > 0 && scratch.block_sums[b] <= 0) --b;
  const size_t begin = b * kExpBlock;
  const size_t len = std::min(kExpBlock, logits.size() - begin);
  return static_cast<int32_t>(begin + walk(scratch.weights.data() + begin, len, target));
}

std::vector<std::pair<int32_t, float>> survivor_probabilities(const Survivors& survivors,
                                                              std::span<const float> logits,
                                                              float temperature,
                                                              SamplerScratch& scratch) {
  std::vector<std::pair<int32_t, float>> out;
  if (survivors.decided) {
    if (*survivors.decided >= 0) out.emplace_back(*survivors.decided, 1.0f);
    return out;
  }
  const float inv_temp = 1.0f / temperature;
  if (!survivors.whole_vocab) {
    const auto tokens = survivors.tokens;
    const double total = list_weights(tokens, survivors.max, inv_temp, scratch.weights);
    for (size_t i = 0; i < tokens.size(); ++i) {
      out.emplace_back(tokens[i].id, static_cast<float>(scratch.weights[i] / total));
    }
    return out;
  }
  const double total = vocab_weights(logits, survivors.max, inv_temp, scratch);
  for (size_t i = 0; i < logits.size(); ++i) {
    if (logits[i] > -std::numeric_limits<float>::infinity()) {
      out.emplace_back(static_cast<int32_t>(i), static_cast<float>(scratch.weights[i] / total));
    }
  }
  return out;
}

}  // namespace pagoda

#include "sampling/chain.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "sampling/fast_exp.h"
#include "sampling/filters.h"
#include "sampling/nucleus.h"
#include "sampling/penalties.h"
#include "sampling/sampler.h"

namespace pagoda {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Above this many tokens over min-p's floor, sorting them for top-p costs more than the
// histogram passes of top_p_nucleus.
constexpr size_t kSortLimit = 4096;

double sum_weights(std::span<const TokenLogit> tokens, float max) {
  double z = 0;
  for (const TokenLogit& t : tokens) z += exp_nonpositive(t.logit - max);
  return z;
}

// top-k first (llama.cpp's default chain): after it only k tokens remain, so top-p and
// min-p are cheap, and the best of the k gives the max without a separate scan.
size_t top_k_chain(std::span<const float> logits, const SamplingParams& params,
                   SamplerScratch& scratch, float& max) {
  auto& tokens = scratch.tokens;
  size_t n = select_top_k(logits, static_cast<size_t>(params.top_k), tokens);
  if (n == 0) return 0;
  max = tokens[0].logit;
  if (params.top_p < 1.0f) {
    const std::span<const TokenLogit> kept(tokens.data(), n);
    n = top_p_count(kept, params.top_p, max, sum_weights(kept, max));
  }
  if (params.min_p > 0.0f) n = min_p_count({tokens.data(), n}, params.min_p, max);
  return n;
}

// Without top-k, top-p normalizes over the whole vocabulary, and min-p's cut (the best
// logit plus log(min_p)) is known up front. min-p runs last but can only drop tokens,
// so when few tokens clear its floor, collect just those and let top-p cut further if
// they already hold p of the mass.
size_t full_vocab_chain(std::span<const float> logits, const SamplingParams& params,
                        SamplerScratch& scratch, float max) {
  auto& tokens = scratch.tokens;
  if (tokens.size() < logits.size()) tokens.resize(logits.size());
  const bool top_p_on = params.top_p < 1.0f;
  if (params.min_p <= 0.0f) {
    return top_p_nucleus(logits, max, params.top_p, kNegInf, tokens.data(), scratch);
  }
  const float floor = min_p_floor(max, params.min_p);
  const size_t n = collect_at_least(logits, floor, tokens.data());
  if (!top_p_on) return n;
  if (n > kSortLimit) {
    return top_p_nucleus(logits, max, params.top_p, floor, tokens.data(), scratch);
  }
  const double z = sum_exp(logits, max, 1.0f);
  const std::span<TokenLogit> kept(tokens.data(), n);
  if (sum_weights(kept, max) < params.top_p * z) return n;
  sort_best_first(kept);
  return top_p_count(kept, params.top_p, max, z);
}

}  // namespace

Survivors run_chain(std::span<float> logits, std::span<const int32_t> history,
                    const SamplingParams& params, SamplerScratch& scratch) {
  Survivors out;
  if (logits.empty()) {
    out.decided = -1;
    return out;
  }
  apply_penalties(logits, history, params, scratch.window);
  // The filters only ever drop tokens below the best one, so with temperature <= 0
  // they cannot change the answer; skipping them is also the fastest path.
  if (params.temperature <= 0) {
    out.decided = argmax(logits);
    return out;
  }
  const bool top_k_on = params.top_k > 0 && static_cast<size_t>(params.top_k) < logits.size();
  size_t n = 0;
  if (top_k_on) {
    n = top_k_chain(logits, params, scratch, out.max);
  } else {
    out.max = max_logit(logits);
    if (!(out.max > kNegInf)) {
      n = 0;
    } else if (params.top_p < 1.0f || params.min_p > 0.0f) {
      n = full_vocab_chain(logits, params, scratch, out.max);
    } else {
      out.whole_vocab = true;
      return out;
    }
  }
  if (n == 0) {  // no finite logit: nothing to draw from
    out.decided = argmax(logits);
    return out;
  }
  out.tokens = {scratch.tokens.data(), n};
  return out;
}

}  // namespace pagoda

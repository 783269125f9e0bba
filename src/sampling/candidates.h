// Picking out the few tokens worth looking at from a full vocabulary of logits. Every
// filter in the chain keeps "the best tokens" under some rule, so each one here works by
// a cheap threshold scan over the logits rather than sorting the vocabulary: Gemma's 262k
// entries would make an O(V log V) sort the most expensive part of a decode step.
//
// "Best" is one total order everywhere: higher logit first, then lower token id, so that
// ties resolve the same way in greedy decoding, top-k and the sorted filters.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace pagoda {

struct TokenLogit {
  int32_t id;
  float logit;
};

inline bool better(const TokenLogit& a, const TokenLogit& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

// Largest logit, ignoring NaNs; -inf when every entry is -inf or NaN, or none exists.
float max_logit(std::span<const float> logits);

// The `k` best tokens, best first, into buf[0, returned count). -inf and NaN logits are
// never selected, so fewer than k come back when fewer are finite. `buf` is working
// space, grown on first use and reused after (no allocation in steady state). Cost: one
// scan of the logits plus O(k log k).
size_t select_top_k(std::span<const float> logits, size_t k, std::vector<TokenLogit>& buf);

// Every token with logit >= threshold (and > -inf), in id order, into out (room for
// logits.size() entries); returns the count.
size_t collect_at_least(std::span<const float> logits, float threshold, TokenLogit* out);

void sort_best_first(std::span<TokenLogit> tokens);

}  // namespace pagoda

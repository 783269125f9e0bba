// Turning logits into the next token. Order of the pipeline (as llama.cpp's default
// chain): repetition/presence/frequency penalties over recent tokens, then top-k,
// top-p, min-p, temperature, and a draw from the per-sampler seeded RNG. Temperature
// <= 0 means greedy (argmax, ties to the lowest id; penalties still apply). One Sampler
// per sequence; not thread-safe.
//
// Cost per call: with top-k on (the default), one scan of the vocabulary and a sort of
// k tokens. Without it, a few vectorized scans, one of them an exponential per token
// (top-p normalizes over the whole vocabulary), and never a sort of the vocabulary. No
// allocation once the first call has sized the working space (scratch.h). The paths
// without top-k need working space the size of the vocabulary (3.7 MB at 262k tokens), so
// an engine with thousands of sequences passes one scratch per thread to sample() instead
// of letting each Sampler keep its own.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <utility>
#include <vector>

#include "sampling/chain.h"
#include "sampling/params.h"

namespace pagoda {

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);

  // Picks the next token. The penalties are applied to `logits` in place (take any
  // logprobs of the raw logits before calling). `history` is the sequence so far
  // (prompt + generated) for the penalties. Returns -1 only for empty logits. Draws
  // one number from the RNG per call unless temperature <= 0.
  int32_t sample(std::span<float> logits, std::span<const int32_t> history);
  // The same with the caller's working space (one per thread, shared by many Samplers);
  // the result does not depend on which scratch is used.
  int32_t sample(std::span<float> logits, std::span<const int32_t> history, SamplerScratch& scratch);

  // Speculative decoding's verification of one draft token (a draft that proposed it
  // with certainty, like prompt lookup): accepts it with the probability p(draft) the
  // whole pipeline gives it, else draws from p without the draft, renormalized. So the
  // token returned is distributed exactly as sample()'s (Leviathan et al.'s modified
  // rejection sampling with a one-hot draft distribution); greedy: the argmax. Sets
  // *accepted when the draft is the token returned. Draws one or two RNG numbers.
  int32_t sample_draft(std::span<float> logits, std::span<const int32_t> history, int32_t draft,
                       SamplerScratch& scratch, bool* accepted);

  const SamplingParams& params() const { return params_; }
  uint64_t seed() const { return seed_; }

  // Probabilities after the whole pipeline, for the tests of the distribution: returns
  // (token, probability) pairs of every candidate that survives the filters. Applies
  // the penalties to `logits` as sample() does; leaves the RNG alone.
  std::vector<std::pair<int32_t, float>> distribution(std::span<float> logits,
                                                      std::span<const int32_t> history) const;

 private:
  SamplingParams params_;
  uint64_t seed_;
  std::mt19937_64 rng_;
  SamplerScratch scratch_;
};

// Index of the largest logit, the lowest index among ties; -1 for an empty span, 0 when
// no entry compares (all NaN).
int32_t argmax(std::span<const float> logits);

}  // namespace pagoda

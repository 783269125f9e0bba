// Per-token self-information, -log p(token | the tokens before it), under a scorer model:
// what prompt compression ranks tokens by. A ScorerSession is one sequence in its own
// KvCache; score() runs new tokens through Model::forward with every row's logits, in
// pieces of at most logits_budget_bytes of logits (64 rows of Gemma 3's 262,144-entry
// vocabulary at the default, as perplexity's), so a large vocabulary never holds more
// than a few dozen rows at once. Smaller pieces cost time: every piece reads all the
// weights again (2,107 Gemma tokens: 9.8 s at 16 rows, 4.5 s at 64, two loaded cores).
// Rows are reduced with eval's summarize_row / token_nll, spread over the model's pool.
// truncate() rolls the sequence back, which is how the iterative compressor
// replaces a scored segment by its compressed form.
//
// With use_subset(), the normalizer is taken over a subset of the vocabulary (the most
// frequent tokens, a head shared between sessions, plus every other token scored, a small
// head of the session's own; model/output_subset.h) instead of all of it:
// a score is then -log of the token's probability renormalized over the subset, lower
// than the exact one by -log(the subset's share of the row's probability), the same for
// every token of a row. Gemma 3's 262,144 x 640 head costs more per token than its 18
// layers; 32,768 tokens of it cost an eighth. The share is measured, not assumed: every
// 32nd row also goes through the whole head, over the hidden states the session keeps
// (n_embd floats a row), and gives its share; when their mean is under min_mass, the
// rows of that score() call are scored again exactly from the kept hidden states (no
// second pass through the layers) and the session stays exact (subset_mass() says what
// was seen).
//
// Cost: one forward pass over the scored tokens (plus one token of overlap per call);
// append() runs tokens without logits. Memory: the model's KV for `capacity` positions
// and one piece of logits.
//
// Thread-safety: uses the model's scratch buffers and pool, so one session per Model runs
// at a time (the server holds its scorer's mutex around a whole compression).
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "base/status.h"
#include "model/kv_cache.h"
#include "model/model.h"
#include "model/output_subset.h"

namespace pagoda {

class ScorerSession {
 public:
  // capacity: the most tokens the sequence will hold (checked against the model's context).
  static Result<ScorerSession> create(Model& model, int32_t capacity, size_t logits_budget_bytes = size_t{64} << 20);

  // The self-information of each of `tokens` given everything before it, in nats, and
  // the tokens appended. A token with nothing before it (the very first) has no
  // prediction: its entry is +infinity. Fails on ids outside the vocabulary, past the
  // capacity, or non-finite logits.
  Result<std::vector<float>> score(std::span<const int32_t> tokens);
  // Appends tokens as context without scoring them.
  Status append(std::span<const int32_t> tokens);
  // Keeps the first n tokens (later positions are overwritten by what comes next).
  void truncate(size_t n);
  // Normalizes over `frequent` (a head of this model's rows, e.g. of tokenizer's
  // frequent_tokens) plus the other tokens scored, from the next score() on; see above.
  // Call before the first score(); a later score() bringing new ids grows the session's
  // own head, so pass every id it will score to cover() first for one normalizer
  // throughout.
  void use_subset(std::shared_ptr<const OutputSubset> frequent, double min_mass = 0.9);
  // Makes the subset hold every id of tokens (the session's own head grows by those the
  // frequent head lacks).
  Status cover(std::span<const int32_t> tokens);
  // The mean share of the probability the subset held in the rows checked (NaN before
  // any), and whether the session scores with the subset (false: exact, from the start
  // or since a check found too little).
  double subset_mass() const { return subset_mass_; }
  bool subset_in_use() const { return subset_on_ && subset_ok_; }
  int64_t subset_size() const { return frequent_ ? frequent_->size() + (extra_ ? extra_->size() : 0) : 0; }
  size_t size() const { return history_.size(); }
  std::span<const int32_t> history() const { return history_; }

 private:
  ScorerSession(Model& model, int32_t capacity, size_t logits_budget_bytes);
  // Runs history_[kv_len_, history_.size() - 1) without logits: everything but the last
  // token, whose row score() needs.
  Status sync();

  Model* model_;
  KvCache kv_;
  int32_t capacity_;
  int32_t piece_rows_ = 1;
  std::vector<int32_t> history_;
  size_t kv_len_ = 0;  // tokens of history_ whose keys/values are in kv_
  std::vector<float> logits_;
  bool subset_on_ = false, subset_ok_ = false;
  double mass_sum_ = 0;  // the checked rows' shares, summed
  int64_t mass_rows_ = 0;
  double subset_min_mass_ = 0.9;
  double subset_mass_ = std::numeric_limits<double>::quiet_NaN();
  std::shared_ptr<const OutputSubset> frequent_;
  std::optional<OutputSubset> extra_;  // scored ids the frequent head lacks
  std::vector<float> hidden_, extra_logits_;
};

// The self-information of every token of `tokens` from scratch (the first is +infinity).
Result<std::vector<float>> self_information(Model& model, std::span<const int32_t> tokens,
                                            size_t logits_budget_bytes = size_t{64} << 20);

}  // namespace pagoda

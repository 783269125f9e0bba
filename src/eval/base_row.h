// A base model's next-token distribution at one scored position, packed for the
// KL-divergence cache, and the comparison of another model's logits against it.
//
// Packing. Tokens whose base log-probability is at most kMinLogProb (-16: p < 1.2e-7) are
// dropped; llama-perplexity's KL divergence leaves exactly those out of its sum, so the
// numbers stay comparable. The kept log-probabilities are codes 1..65535 on a linear grid
// from the smallest kept value `lo` to the largest: log p = lo + (code - 1) * step with
// step = (max - lo) / 65534; code 0 means dropped. The grid spans at most 16 nats, so a
// value is off by at most step / 2 <= 1.3e-4 nats (llama.cpp's grid is never narrower).
// A row keeps whichever layout is smaller: dense (a code for every token) or sparse
// (ascending token ids with their codes), sparse when under a third of the vocabulary is
// kept, which is most rows of a large vocabulary. The exact NLL of the target token and
// the exact argmax are kept beside the codes, so the base PPL and top-1 agreement carry
// no rounding at all.
//
// Top-k rows (a teacher's distillation dump, `pagoda distill-dump`): only the k most
// likely tokens, sparse, plus the probability of all the others together (`tail`) and
// the whole distribution's entropy H. KL(p || q) = sum p log p - sum p log q: over the
// k both sums are exact; over the tail, sum p log p is known exactly from H less the
// k's part, and sum p log q (the teacher's tail weights on the student's tail
// log-probabilities, which the dump cannot hold) is taken as tail * (the mean of log q
// over the student's tail, weighted by the student's q). That is the one approximation:
// the teacher's tail weighted like the student's. Merging the tail into one outcome
// instead (tail * log(tail / q_tail)) is a lower bound and measured 29% low on Gemma 3
// 270M at k = 32, this one 14.6% low (the student's tail errors it cannot see); at k =
// 4096, 1.8% (docs/quantize.md, "Distillation dumps").
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace pagoda {

inline constexpr float kMinLogProb = -16.0f;
inline constexpr int32_t kCodeLevels = 65534;  // steps between code 1 and code 65535

struct BaseRow {
  float lo = 0;    // log-probability of code 1
  float step = 0;  // log-probability per code step (0 when one value is kept)
  float nll = 0;   // exact -log p_base(target token)
  int32_t argmax = 0;
  bool sparse = false;
  float tail = -1;  // top-k rows: the probability outside ids; < 0: not a top-k row
  float entropy = 0; // top-k rows: the whole distribution's entropy, nats
  std::vector<uint16_t> codes;  // dense: one per token; sparse: one per entry of ids
  std::vector<uint32_t> ids;    // sparse only: the kept tokens, ascending

  double decode(uint16_t code) const { return static_cast<double>(lo) + (code - 1) * static_cast<double>(step); }
  // The stored log-probability of a token; -infinity when it was dropped.
  double log_prob(int32_t token) const;
  // Bytes of the packed codes and ids (the row's size in the cache, less its fixed part).
  size_t payload_bytes() const { return codes.size() * sizeof(uint16_t) + ids.size() * sizeof(uint32_t); }
};

// Packs the row of base logits for a position whose next token is `target`. `out`'s
// vectors are reused, so packing row after row into one BaseRow does not allocate.
void pack_base_row(std::span<const float> logits, int32_t target, BaseRow& out);
// Packs only the k most likely tokens (ties: the lower id) and the tail's probability.
void pack_top_k_row(std::span<const float> logits, int32_t target, int32_t k, BaseRow& out);

struct RowComparison {
  double kld = 0;        // KL(base || model) over the kept tokens, in nats
  double nll = 0;        // the model's -log p(target)
  bool same_top = false; // the model's argmax (ties: lowest id) equals the base's
};

// Compares the model's logits for one position with the base row. `target` is the next
// token (the same the base row was packed for).
RowComparison compare_to_base(const BaseRow& base, std::span<const float> logits, int32_t target);

}  // namespace pagoda

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

struct RowComparison {
  double kld = 0;        // KL(base || model) over the kept tokens, in nats
  double nll = 0;        // the model's -log p(target)
  bool same_top = false; // the model's argmax (ties: lowest id) equals the base's
};

// Compares the model's logits for one position with the base row. `target` is the next
// token (the same the base row was packed for).
RowComparison compare_to_base(const BaseRow& base, std::span<const float> logits, int32_t target);

}  // namespace pagoda

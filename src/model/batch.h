// One step's work for the model: a flat list of tokens from any number of sequences
// (prefill chunks and decode tokens alike, vLLM's flattened layout), each sequence's
// tokens consecutive, with its first position and the block tables (one per layer group
// of the KV storage, kv/kv_layout.h) through which its keys/values are written and read.
// The engine builds it; the model consumes it.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kv/block_pool.h"
#include "model/config.h"

namespace pagoda {

struct BatchSeq {
  int32_t n_tokens = 0;                // this sequence's tokens in Batch::tokens (consecutive)
  int32_t pos0 = 0;                    // position of the first of them
  // Per layer group: covers positions 0 .. pos0 + n_tokens - 1; a sliding-window group's
  // entries before the window of position pos0 may be kNoBlock.
  std::span<const std::vector<BlockId>> tables;
  bool logits = false;                 // produce logits for its last logit_rows tokens
  // With logits: rows for this many of its last tokens, in position order (1: the last
  // token only; speculative decoding verifies its drafted tokens with one row each).
  int32_t logit_rows = 1;
  // Empty, or a speculative draft tree over the logit rows (at most 64): tree_parent[r] is
  // row r's parent row (row 0, the sequence's last verified token, has -1; a parent comes
  // before its child). Each row then sits at position (first row's) + its depth and
  // attends to the tokens before the rows plus its own ancestors only (kernels'
  // AttnSeq::tree), so every root-to-leaf branch is computed as if decoded alone; the
  // keys of row r are written at the first row's position + r whatever its depth.
  std::span<const int32_t> tree_parent;
  // An embedding: Model::forward writes this sequence's pooled hidden state (its tokens in
  // this batch: their sum for kMean, position 0's row for kCls, the last one's for kLast).
  Pooling pool = Pooling::kNone;
  // > 0: the sequence is a text pair (a cross-encoder's query and document): its tokens
  // from this position on are token type 1 ("sentence B"), the ones before type 0, as
  // Hugging Face's token_type_ids; 0: every token is type 0.
  int32_t segment_b = 0;
};

struct Batch {
  std::vector<int32_t> tokens;
  std::vector<BatchSeq> seqs;
  // k > 0: every logits row is read only for its k best tokens (greedy sampling: 1;
  // top-k sampling: its k), with no penalties, logprobs, raw logits or grammar reading the
  // rest. A model split over processes then sends each rank's k best (logit, id) instead
  // of its slice of the row, and the row rank 0 gets is -inf but at those: it holds the
  // row's k best under sampling's order (higher logit, then lower id), so greedy and
  // top-k sampling pick what they pick from the whole row. 0: whole rows.
  int32_t top_candidates = 0;

  void clear() {
    tokens.clear();
    seqs.clear();
    top_candidates = 0;
  }
  void add(std::span<const int32_t> toks, int32_t pos0, std::span<const std::vector<BlockId>> tables, bool logits,
           int32_t logit_rows = 1) {
    tokens.insert(tokens.end(), toks.begin(), toks.end());
    BatchSeq& s = seqs.emplace_back();
    s.n_tokens = static_cast<int32_t>(toks.size());
    s.pos0 = pos0;
    s.tables = tables;
    s.logits = logits;
    s.logit_rows = logit_rows;
  }
  int32_t n_pooled() const {
    int32_t n = 0;
    for (const BatchSeq& s : seqs) n += s.pool != Pooling::kNone ? 1 : 0;
    return n;
  }
  int32_t n_logits() const {
    int32_t n = 0;
    for (const BatchSeq& s : seqs) n += s.logits ? s.logit_rows : 0;
    return n;
  }
};

}  // namespace pagoda

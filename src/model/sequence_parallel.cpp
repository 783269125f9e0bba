// Sequence parallelism: each rank runs a contiguous range of a step's tokens through
// every layer with the whole model, so a long prompt's prefill is shared out. Attention
// is exact: after each layer's keys/values are computed, every rank gathers every
// token's and stores them all in its own KV storage (an all-gather of K and V rows, the
// simplest of the ring and all-gather designs, and the cheapest with grouped KV heads),
// so each query sees every earlier key whichever rank computed it. Rank 0 receives the
// logits rows. Each rank's matmuls see fewer tokens than one process's, which can pick
// another kernel body (GEMV for one token, tiles for more): docs/parallel.md says what
// that changes.
#include <algorithm>

#include "model/for_each_token.h"
#include "model/model.h"

namespace pagoda {

Status Model::forward_chunk_sp(const int32_t* tokens, std::span<const BatchSeq> seqs, KvStorage& kv, float* logits) {
  const ModelConfig& c = config_;
  int64_t n = 0;
  for (const BatchSeq& s : seqs) n += s.n_tokens;
  const int32_t ranks = split_.sp_size;
  sp_tokens_.resize(static_cast<size_t>(ranks));
  for (int32_t r = 0; r < ranks; ++r) sp_tokens_[static_cast<size_t>(r)] = split_.tokens_of(n, r).size();
  const Range mine = split_.tokens_of(n, split_.sp_rank);
  // Every rank's logits rows (the rows of a sequence's tail that fall in its range), and
  // this rank's part of each sequence.
  counts_.assign(static_cast<size_t>(ranks), 0);
  sp_pos_.resize(static_cast<size_t>(n));
  sp_tables_.resize(static_cast<size_t>(n));
  sp_local_.clear();
  int64_t t0 = 0;
  for (const BatchSeq& s : seqs) {
    for (int32_t j = 0; j < s.n_tokens; ++j) {
      sp_pos_[static_cast<size_t>(t0 + j)] = s.pos0 + j;
      sp_tables_[static_cast<size_t>(t0 + j)] = s.tables.data();
    }
    const int64_t first_row = t0 + s.n_tokens - (s.logits ? s.logit_rows : 0);
    for (int32_t r = 0; r < ranks; ++r) {
      const Range part = split_.tokens_of(n, r);
      const int64_t a = std::max(t0, part.begin), b = std::min(t0 + s.n_tokens, part.end);
      if (a >= b) continue;
      const int32_t rows = s.logits ? static_cast<int32_t>(std::max<int64_t>(0, b - std::max(a, first_row))) : 0;
      counts_[static_cast<size_t>(r)] += rows;
      if (r != split_.sp_rank) continue;
      BatchSeq p = s;
      p.pos0 = s.pos0 + static_cast<int32_t>(a - t0);
      p.n_tokens = static_cast<int32_t>(b - a);
      p.logit_rows = rows;
      p.logits = rows > 0;
      p.pool = Pooling::kNone;
      sp_local_.push_back(p);
    }
    t0 += s.n_tokens;
  }
  const int64_t nl = plan_chunk(sp_local_, kv);
  embed(tokens + mine.begin, nl);
  for (int32_t l = 0; l < c.n_layer; ++l) {
    PAGODA_TRY(attention_block(l, nl, kv));
    if (c.is_moe()) PAGODA_TRY(moe_block(l, nl));
    else PAGODA_TRY(ffn_block(l, nl));
  }
  const int64_t V = c.n_vocab;
  const int64_t mine_rows = counts_[static_cast<size_t>(split_.sp_rank)];
  sp_logits_.resize(static_cast<size_t>(mine_rows * V));
  if (!sp_local_.empty()) PAGODA_TRY(output_logits(sp_local_, sp_logits_.data(), false));
  int64_t rows = 0;
  for (int64_t k : counts_) rows += k;
  if (rows == 0) return Status::ok();
  if (top_k_ == 0) return comm_->gather_rows_to_root(sp_logits_.data(), counts_, V, logits);
  // Rows are whole on each rank: their k best (logit, id) pairs cross instead.
  row_best(sp_logits_.data(), mine_rows, V, 0);
  best_all_.resize(static_cast<size_t>(rows * 2 * top_k_));
  PAGODA_TRY(comm_->gather_rows_to_root(best_.data(), counts_, 2 * top_k_, best_all_.data()));
  if (split_.root()) expand_best(best_all_.data(), rows, top_k_, logits);
  return Status::ok();
}

Status Model::store_gathered_kv(int32_t l, int64_t n_local, KvStorage& kv) {
  const int64_t kvd = int64_t{kv_heads_held()} * config_.head_dim;
  const int64_t n = static_cast<int64_t>(sp_pos_.size());
  sp_k_.resize(static_cast<size_t>(n * kvd));
  sp_v_.resize(static_cast<size_t>(n * kvd));
  PAGODA_TRY(comm_->gather_rows(k_.data(), sp_tokens_, kvd, sp_k_.data()));
  PAGODA_TRY(comm_->gather_rows(v_.data(), sp_tokens_, kvd, sp_v_.data()));
  const int32_t group = kv.layout().group_of(l);
  const int32_t shift = kv.block_shift();
  const int32_t mask = kv.shape().block_size - 1;
  // Each token's slot is its own: the stores split over the pool as the one-process path's do.
  for_each_token(*pool_, n, 2 * kvd, [&](int64_t t) {
    const int32_t pos = sp_pos_[static_cast<size_t>(t)];
    kv.store(l, sp_tables_[static_cast<size_t>(t)][group][pos >> shift], pos & mask, &sp_k_[t * kvd],
             &sp_v_[t * kvd]);
  });
  return Status::ok();
}

}  // namespace pagoda

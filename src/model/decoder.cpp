// The shared forward pass of every supported architecture: a decoder built from blocks
// (embedding, attention, FFN, output), each owning its optional pieces (pre-norms, RMSNorm
// or LayerNorm, biases, QK-norm per head or over whole rows, post-norms, a gated or
// ungated FFN, embedding scale, sliding windows), which come from the config and the
// bound weights. Explicit code over the kernels, no graph.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <limits>
#include <string>

#include "base/fp16.h"
#include "base/mapped_file.h"
#include "kernels/attention/attention.h"
#include "kernels/elementwise/elementwise.h"
#include "kernels/matmul/matmul.h"
#include "kernels/elementwise/rope.h"
#include "model/arch_spec.h"
#include "model/for_each_token.h"
#include "model/model.h"

namespace pagoda {
namespace {

// Prompts are processed in chunks of this many tokens so scratch memory stays bounded.
constexpr int64_t kMaxChunk = 512;

// A pre-norm or the output norm of one row (n values): the config's kind, with the bias
// LayerNorm has.
void norm_row(const ModelConfig& c, const float* x, const float* w, const float* b, int64_t n, float* out) {
  if (c.norm == NormKind::kLayer) layer_norm(x, w, b, n, c.norm_eps, out);
  else rms_norm(x, w, n, c.norm_eps, out);
}

}  // namespace

// Floats per token of each scratch buffer, in ensure_scratch's order. An MoE layer's
// gate/up buffers hold its shared expert's (none: nothing), and the routed experts take
// n_expert_used gathered rows per token (input, gate, up, down output) beside the router's
// logits.
static std::array<int64_t, 14> scratch_widths(const ModelConfig& c) {
  const int64_t ff = c.is_moe() ? c.n_ff_shexp : c.n_ff;
  const int64_t k = c.n_expert_used;
  return {c.n_embd, c.n_embd, c.q_dim(), c.kv_dim(), c.kv_dim(), c.q_dim(), c.n_embd, ff, ff,
          c.n_expert, k * c.n_embd, k * c.n_ff_exp, k * c.n_ff_exp, k * c.n_embd};
}

size_t Model::scratch_bytes(const ModelConfig& c, int64_t tokens) {
  int64_t floats = 0;
  for (int64_t w : scratch_widths(c)) floats += w;
  // The routing's ids, weights and row indices, 4 bytes each.
  floats += 3 * static_cast<int64_t>(c.n_expert_used);
  return static_cast<size_t>(floats * std::min(tokens, kMaxChunk)) * sizeof(float);
}

// Per token, the floats of each of tp_in_ and tp_out_: the widest gathered input of a
// row-split matrix and the widest output; an MoE layer's down projections gather each
// token's k experts' rows and the shared expert's at once, and their k + 1 outputs
// (moe_down_split), the two buffers taking turns as send and receive buffers.
static int64_t tp_scratch_floats(const ModelConfig& c) {
  int64_t w = std::max<int64_t>({c.q_dim(), c.n_ff, c.n_embd});
  if (c.is_moe())
    w = std::max<int64_t>({w, c.n_expert_used * c.n_ff_exp + c.n_ff_shexp, (c.n_expert_used + 1) * c.n_embd});
  return w;
}

size_t Model::tp_scratch_bytes(const ModelConfig& c, int64_t tokens) {
  return 2 * static_cast<size_t>(tp_scratch_floats(c) * std::min(tokens, kMaxChunk)) * sizeof(float);
}

void Model::ensure_scratch(int64_t n) {
  if (n <= scratch_tokens_) return;
  const std::array<std::vector<float>*, 14> buffers = {&x_,         &xn_,  &q_,   &k_,   &v_,    &att_, &proj_,
                                                       &gate_,      &up_,  &router_logits_, &moe_x_, &moe_gate_,
                                                       &moe_up_,    &moe_down_};
  const std::array<int64_t, 14> widths = scratch_widths(config_);
  for (size_t i = 0; i < buffers.size(); ++i) buffers[i]->resize(n * widths[i]);
  const size_t routed = static_cast<size_t>(n) * static_cast<size_t>(config_.n_expert_used);
  moe_ids_.resize(routed);
  moe_weights_.resize(routed);
  moe_rows_.resize(routed);
  if (split_.tensor_parallel()) {
    const size_t floats = static_cast<size_t>(n * tp_scratch_floats(config_));
    tp_in_.resize(floats);
    tp_out_.resize(floats);
  }
  scratch_tokens_ = n;
}

Status Model::forward(const Batch& batch, KvStorage& kv, float* logits, float* pooled) {
  const ModelConfig& c = config_;
  if (batch.seqs.empty()) return error("forward: empty batch");
  if (batch.n_pooled() > 0 && pooled == nullptr) return error("forward: pooled rows asked for but no buffer given");
  if (kv.shape().n_kv_heads != kv_heads_held() || kv.shape().head_dim != c.head_dim || kv.shape().n_layer != c.n_layer)
    return error("KV storage ({} layers, {} heads of {}) does not match the model ({} layers, {} heads of {})",
                 kv.shape().n_layer, kv.shape().n_kv_heads, kv.shape().head_dim, c.n_layer, kv_heads_held(),
                 c.head_dim);
  const bool split = split_.split();
  if (split && comm_ == nullptr) return error("forward: this model is split over processes but has no transport");
  if ((split_.pipelined() || split_.sequence_parallel()) && batch.n_pooled() > 0)
    return error("embeddings are not computed under pipeline or sequence parallelism (--pp, --sp); run the "
                 "embedding model with --tp or in one process");
  for (int32_t t : batch.tokens)
    if (t < 0 || t >= c.n_vocab) return error("token id {} is outside the vocabulary (0..{})", t, c.n_vocab - 1);
  const KvLayout& layout = kv.layout();
  if (layout.n_layer() != c.n_layer)
    return error("KV storage layout has {} layers, the model {}", layout.n_layer(), c.n_layer);
  // A layer group may release blocks out of its window only if each of its layers reads
  // no further back.
  for (int32_t l = 0; l < c.n_layer; ++l) {
    const int32_t gw = layout.window(layout.group_of(l));
    const int32_t lw = c.layer_is_local[l] ? c.sliding_window : 0;
    if (gw > 0 && (lw <= 0 || lw > gw))
      return error("KV storage keeps {} positions for layer {}, which attends to {}", gw, l,
                   lw > 0 ? std::to_string(lw) : std::string("all"));
  }
  int64_t total = 0;
  const int32_t bs = kv.shape().block_size;
  for (const BatchSeq& s : batch.seqs) {
    if (s.n_tokens <= 0 || s.pos0 < 0) return error("forward: a sequence has {} tokens at position {}", s.n_tokens, s.pos0);
    if (s.logits && (s.logit_rows < 1 || s.logit_rows > s.n_tokens))
      return error("forward: a sequence of {} tokens asks for {} rows of logits", s.n_tokens, s.logit_rows);
    if (!s.tree_parent.empty()) {
      if (!s.logits || static_cast<int32_t>(s.tree_parent.size()) != s.logit_rows || s.logit_rows > 64)
        return error("forward: a draft tree of {} nodes needs as many logit rows (at most 64), not {}",
                     s.tree_parent.size(), s.logits ? s.logit_rows : 0);
      if (split_.split()) return error("forward: draft trees are not verified on a model split over processes");
      for (size_t r = 0; r < s.tree_parent.size(); ++r)
        if (r == 0 ? s.tree_parent[r] != -1 : s.tree_parent[r] < 0 || s.tree_parent[r] >= static_cast<int32_t>(r))
          return error("forward: draft tree node {} has parent {} (the root's is -1, any other's an earlier node)", r,
                       s.tree_parent[r]);
    }
    if (s.logits && !c.has_lm_head)
      return error("this {} model has no output head: it gives embeddings, not logits", c.arch_name);
    if (s.pool == Pooling::kRank && c.n_cls_out == 0)
      return error("rank pooling needs a classification head (cls.output.weight), which this model lacks");
    if (s.segment_b < 0 || (s.segment_b > 0 && c.n_token_types < 2))
      return error("a text pair's second segment (from position {}) needs two token types; this model has {}",
                   s.segment_b, c.n_token_types);
    // An encoder's tokens each see the whole sequence, which must therefore be here whole.
    if (!c.causal && s.pos0 != 0)
      return error("forward: an encoder's sequence runs whole from position 0 (this one starts at {})", s.pos0);
    if (!weights_.pos_embd.empty() && static_cast<int64_t>(s.pos0) + s.n_tokens > weights_.pos_embd.rows)
      return error("{} tokens at position {} go past this model's {} learned positions", s.n_tokens, s.pos0,
                   weights_.pos_embd.rows);
    if (static_cast<int32_t>(s.tables.size()) != layout.n_groups())
      return error("forward: a sequence has {} block tables for {} KV layer groups", s.tables.size(), layout.n_groups());
    const int64_t end = static_cast<int64_t>(s.pos0) + s.n_tokens;
    for (int32_t g = 0; g < layout.n_groups(); ++g) {
      const std::vector<BlockId>& table = s.tables[g];
      if (end > static_cast<int64_t>(table.size()) * bs)
        return error("{} tokens at position {} do not fit in the {} KV blocks of {} positions given", s.n_tokens, s.pos0,
                     table.size(), bs);
      const size_t used = static_cast<size_t>((end + bs - 1) / bs);
      for (size_t i = static_cast<size_t>(layout.first_live_block(g, s.pos0, bs)); i < used; ++i)
        if (table[i] < 0 || table[i] >= kv.num_blocks())
          return error("KV block id {} is outside the storage (0..{})", table[i], kv.num_blocks() - 1);
    }
    total += s.n_tokens;
  }
  if (total != static_cast<int64_t>(batch.tokens.size()))
    return error("forward: the sequences hold {} tokens but the batch has {}", total, batch.tokens.size());
  // Rank 0 decides every step; the other ranks run the same one.
  if (split && split_.root()) PAGODA_TRY(comm_->begin_step(batch, kv));
  top_k_ = batch.top_candidates;
  return run_timed(batch.tokens.data(), batch.seqs, kv, logits, false, pooled);
}

// One step: the expert statistics count it (and its time) when the model has experts.
Status Model::run_timed(const int32_t* tokens, std::span<const BatchSeq> seqs, KvStorage& kv, float* logits,
                        bool all_logits, float* pooled) {
  if (!config_.is_moe() || !moe_stats_on_) return run_batch(tokens, seqs, kv, logits, all_logits, pooled);
  const auto t0 = std::chrono::steady_clock::now();
  moe_stats_.begin_step();
  Status st = run_batch(tokens, seqs, kv, logits, all_logits, pooled);
  moe_stats_.add_forward_seconds(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return st;
}

Status Model::run_batch(const int32_t* tokens, std::span<const BatchSeq> seqs, KvStorage& kv, float* logits,
                        bool all_logits, float* pooled) {
  // Pieces of at most kMaxChunk tokens, cutting a sequence where a piece fills up; only
  // the piece holding a sequence's last token produces its logits. An encoder's sequence
  // is never cut (its tokens see one another): it starts a piece of its own when it does
  // not fit the rest of one, and a longer one is a piece by itself.
  const int64_t V = row_width();
  const int64_t E = config_.n_embd;
  int32_t n_slots = 0;
  for (const BatchSeq& s : seqs) n_slots += s.pool != Pooling::kNone ? 1 : 0;
  if (pooled != nullptr) std::fill(pooled, pooled + n_slots * E, 0.0f);
  int32_t slot = 0;  // seqs[si]'s row of pooled
  size_t si = 0;
  int32_t done = 0;  // tokens of seqs[si] already in earlier pieces
  while (si < seqs.size()) {
    pieces_.clear();
    piece_slots_.clear();
    int64_t n = 0;
    int64_t rows = 0;
    const int32_t* piece_tokens = tokens;
    while (si < seqs.size() && n < kMaxChunk) {
      const BatchSeq& s = seqs[si];
      if (!config_.causal && n > 0 && s.n_tokens > kMaxChunk - n) break;
      const int32_t take = config_.causal ? static_cast<int32_t>(std::min<int64_t>(s.n_tokens - done, kMaxChunk - n))
                                          : s.n_tokens;
      BatchSeq p = s;
      p.pos0 = s.pos0 + done;
      p.n_tokens = take;
      // The logits rows are the sequence's last logit_rows tokens: the tail of each piece
      // they reach into.
      const int32_t first_row = s.n_tokens - s.logit_rows;
      p.logit_rows = s.logits ? std::max(0, done + take - std::max(done, first_row)) : 0;
      p.logits = p.logit_rows > 0;
      // Each piece pools its own tokens: all of them (a mean sums over the pieces), the
      // first position's, or the sequence's last token's.
      if (((p.pool == Pooling::kCls || p.pool == Pooling::kRank) && p.pos0 != 0) ||
          (p.pool == Pooling::kLast && done + take != s.n_tokens))
        p.pool = Pooling::kNone;
      pieces_.push_back(p);
      piece_slots_.push_back(s.pool != Pooling::kNone ? slot : -1);
      rows += all_logits ? take : p.logit_rows;
      n += take;
      done += take;
      if (done == s.n_tokens) {
        if (s.pool != Pooling::kNone) ++slot;
        ++si;
        done = 0;
      }
    }
    PAGODA_TRY(forward_chunk(piece_tokens, pieces_, kv, logits, all_logits, pooled));
    tokens += n;
    if (logits != nullptr) logits += rows * V;
  }
  return Status::ok();
}

Status Model::forward(std::span<const int32_t> tokens, int32_t pos0, KvCache& kv, float* logits, bool all_logits) {
  const ModelConfig& c = config_;
  if (tokens.empty()) return error("forward: no tokens");
  if (!kv.ok()) return error("the KV cache could not be allocated");
  for (int32_t t : tokens)
    if (t < 0 || t >= c.n_vocab) return error("token id {} is outside the vocabulary (0..{})", t, c.n_vocab - 1);
  if (pos0 < 0 || static_cast<int64_t>(pos0) + static_cast<int64_t>(tokens.size()) > kv.n_ctx())
    return error("{} tokens at position {} do not fit in the context of {} tokens", tokens.size(), pos0, kv.n_ctx());
  if (kv.kv_dim() != c.kv_dim()) return error("KV cache width {} does not match the model's {}", kv.kv_dim(), c.kv_dim());
  if (split_.split())
    return error("this model is split over processes: it runs through the engine's batched forward only");
  BatchSeq s;
  s.n_tokens = static_cast<int32_t>(tokens.size());
  s.pos0 = pos0;
  s.tables = kv.tables();
  s.logits = logits != nullptr;
  if (s.logits && !c.has_lm_head)
    return error("this {} model has no output head: it gives embeddings, not logits", c.arch_name);
  if (!c.causal && pos0 != 0)
    return error("forward: an encoder's sequence runs whole from position 0 (this one starts at {})", pos0);
  return run_timed(tokens.data(), std::span<const BatchSeq>(&s, 1), kv.storage(), logits, all_logits);
}

Status Model::forward_hidden(std::span<const int32_t> tokens, int32_t pos0, KvCache& kv, float* hidden) {
  if (hidden == nullptr) return error("forward_hidden: no output");
  // Only for this call: the engine's forward(batch) always makes logits.
  hidden_out_ = true;
  Status st = forward(tokens, pos0, kv, hidden, /*all_logits=*/true);
  hidden_out_ = false;
  return st;
}

void Model::head_logits(const WeightView& head, const float* hidden, int64_t rows, float* out) const {
  const ModelConfig& c = config_;
  const int64_t V = head.rows;
  matmul(head, hidden, rows, out, *pool_);
  if (c.logit_scale != 1.0f) {
    // ggml multiplies by the reciprocal, so the bits follow llama.cpp's.
    for_each_token(*pool_, rows, V, [&](int64_t r) { scale_inplace(out + r * V, 1.0f / c.logit_scale, V); });
  }
  if (c.final_softcap > 0.0f)
    for_each_token(*pool_, rows, V, [&](int64_t r) { softcap_inplace(out + r * V, c.final_softcap, V); });
}

Status Model::forward_chunk(const int32_t* tokens, std::span<const BatchSeq> seqs, KvStorage& kv, float* logits,
                            bool all_logits, float* pooled) {
  if (split_.sequence_parallel()) return forward_chunk_sp(tokens, seqs, kv, logits);
  const ModelConfig& c = config_;
  const int64_t n = plan_chunk(seqs, kv);
  const int64_t E = c.n_embd;
  const Range layers = split_.layers;
  if (split_.first_stage()) {
    embed(tokens, n);
  } else {
    // A later stage starts from the residual stream the one before it ends with.
    PAGODA_TRY(comm_->recv_prev(x_.data(), n * E));
    const LayerWeights& L = weights_.layers[static_cast<size_t>(layers.begin)];
    if (L.attn_norm != nullptr)
      for_each_token(*pool_, n, E, [&](int64_t t) { norm_row(c, &x_[t * E], L.attn_norm, L.attn_norm_b, E, &xn_[t * E]); });
  }
  for (int64_t l = layers.begin; l < layers.end; ++l) {
    PAGODA_TRY(attention_block(static_cast<int32_t>(l), n, kv));
    if (c.is_moe()) PAGODA_TRY(moe_block(static_cast<int32_t>(l), n));
    else PAGODA_TRY(ffn_block(static_cast<int32_t>(l), n));
  }
  if (!split_.last_stage()) {
    PAGODA_TRY(comm_->send_next(x_.data(), n * E));
    // Rank 0 receives the logits the last stage sends back.
    if (logits != nullptr && split_.root()) {
      int64_t rows = 0;
      for (const BatchSeq& s : seqs) rows += all_logits ? s.n_tokens : s.logits ? s.logit_rows : 0;
      if (rows > 0) return collect_split_logits(nullptr, rows, logits);
    }
    return Status::ok();
  }
  // A split model's last stage computes its slice of the logits whether or not this
  // process keeps them (rank 0 collects every slice).
  if (logits != nullptr || split_.tensor_parallel() || split_.pipelined())
    PAGODA_TRY(output_logits(seqs, logits, all_logits));
  if (pooled != nullptr) pool_hidden(seqs, pooled);
  return Status::ok();
}

void Model::pool_hidden(std::span<const BatchSeq> seqs, float* pooled) {
  const ModelConfig& c = config_;
  const int64_t E = c.n_embd;
  pool_row_.resize(static_cast<size_t>(E));
  // The hidden state an embedding is made of: after the output norm, as llama.cpp's
  // embeddings are; an encoder's last layer ends in a norm of its own.
  auto hidden = [&](int64_t t, float* out) {
    if (weights_.output_norm != nullptr)
      norm_row(c, &x_[t * E], weights_.output_norm, weights_.output_norm_b, E, out);
    else
      std::copy_n(&x_[t * E], E, out);
  };
  rank_rows_.clear();
  int64_t t0 = 0;
  for (size_t i = 0; i < seqs.size(); t0 += seqs[i].n_tokens, ++i) {
    const BatchSeq& s = seqs[i];
    if (s.pool == Pooling::kNone) continue;
    float* out = pooled + static_cast<int64_t>(piece_slots_[i]) * E;
    switch (s.pool) {
      case Pooling::kMean:
        for (int32_t j = 0; j < s.n_tokens; ++j) {
          hidden(t0 + j, pool_row_.data());
          add_inplace(out, pool_row_.data(), E);
        }
        break;
      case Pooling::kCls: hidden(t0, out); break;
      case Pooling::kLast: hidden(t0 + s.n_tokens - 1, out); break;
      case Pooling::kRank: hidden(t0, out); rank_rows_.push_back(out); break;
      case Pooling::kNone: break;
    }
  }
  if (!rank_rows_.empty()) rank_head();
}

int64_t Model::plan_chunk(std::span<const BatchSeq> seqs, KvStorage& kv) {
  int64_t n = 0;
  for (const BatchSeq& s : seqs) n += s.n_tokens;
  ensure_scratch(n);
  pos_.resize(static_cast<size_t>(n));
  slot_.resize(static_cast<size_t>(n));
  types_.resize(static_cast<size_t>(n));
  tables_.resize(static_cast<size_t>(n));
  // Per layer group, every sequence reading through that group's tables.
  const KvLayout& layout = kv.layout();
  // Rows of logits past a sequence's first (speculative decoding's verified drafts) attend
  // as lone decode tokens: plain decoding computes each of those tokens in a step of its
  // own, and attention sums a lone token's scores in another order than a block of a
  // sequence's tokens, so only this keeps speculation's greedy tokens those of plain
  // decoding (tests/engine: the packed-panel workload). The tokens before the rows (a
  // prefill chunk) attend as one block, as any prefill does.
  // An encoder's sequence (here whole, Model::forward checks) attends bidirectionally:
  // every token sees every key of it.
  const bool causal = config_.causal;
  n_attn_seqs_ = 0;
  for (const BatchSeq& s : seqs) n_attn_seqs_ += lone_rows(s) + (s.n_tokens > lone_rows(s) ? 1 : 0);
  attn_seqs_.resize(n_attn_seqs_ * static_cast<size_t>(layout.n_groups()));
  int64_t t = 0;
  size_t a = 0;
  for (const BatchSeq& s : seqs) {
    const int32_t lone = lone_rows(s), head = s.n_tokens - lone;
    // A draft tree's rows: each node's ancestors (itself included) as key bits from the
    // root's slot, and its depth.
    const bool tree = !s.tree_parent.empty();
    if (tree) {
      tree_masks_.resize(static_cast<size_t>(lone));
      tree_depths_.resize(static_cast<size_t>(lone));
    }
    for (int32_t r = 0; tree && r < lone; ++r) {
      const int32_t parent = s.tree_parent[static_cast<size_t>(r)];
      tree_masks_[r] = (parent >= 0 ? tree_masks_[parent] : 0) | (uint64_t{1} << r);
      tree_depths_[r] = parent >= 0 ? tree_depths_[parent] + 1 : 0;
    }
    const int32_t base = s.pos0 + head;
    for (int32_t g = 0; g < layout.n_groups(); ++g) {
      AttnSeq* out = &attn_seqs_[g * n_attn_seqs_ + a];
      if (head > 0) {
        *out = AttnSeq{};
        out->q_offset = t;
        out->n_tokens = head;
        out->pos0 = s.pos0;
        out->block_table = s.tables[g].data();
        out->bidirectional = !causal;
        ++out;
      }
      for (int32_t j = head; j < s.n_tokens; ++j) {
        *out = AttnSeq{};
        out->q_offset = t + j;
        out->n_tokens = 1;
        out->pos0 = s.pos0 + j;
        out->block_table = s.tables[g].data();
        if (tree) {
          out->tree = tree_masks_[j - head];
          out->tree_base = base;
          out->tree_pos = base + tree_depths_[j - head];
        }
        ++out;
      }
    }
    a += lone + (head > 0 ? 1 : 0);
    for (int32_t j = 0; j < s.n_tokens; ++j, ++t) {
      slot_[t] = s.pos0 + j;
      pos_[t] = tree && j >= head ? base + tree_depths_[j - head] : slot_[t];
      tables_[t] = s.tables.data();
      types_[t] = s.segment_b > 0 && pos_[t] >= s.segment_b ? 1 : 0;
    }
  }
  return n;
}

// Token embeddings into the residual x_, and the first layer's attention norm (if it has
// one) into xn_.
void Model::embed(const int32_t* tokens, int64_t n) {
  const ModelConfig& c = config_;
  const int64_t E = c.n_embd;
  const LayerWeights& L0 = weights_.layers[0];
  const ModelWeights& w = weights_;
  for_each_token(*pool_, n, E, [&](int64_t t) {
    dequantize_weight_row(w.tok_embd, tokens[t], &x_[t * E]);
    if (release_embedding_rows_) release_embedding_row(tokens[t]);
    if (c.embed_scale != 1.0f) scale_inplace(&x_[t * E], c.embed_scale, E);
    if (!w.pos_embd.empty()) {
      // Learned positions (BERT): + position row + the token type's row, LayerNormed;
      // xn_'s row is free until the first norm below.
      dequantize_weight_row(w.pos_embd, pos_[t], &xn_[t * E]);
      add_inplace(&x_[t * E], &xn_[t * E], E);
      add_inplace(&x_[t * E], w.type_embd + types_[t] * E, E);
      layer_norm(&x_[t * E], w.embd_norm, w.embd_norm_b, E, c.norm_eps, &x_[t * E]);
    }
    if (L0.attn_norm != nullptr) norm_row(c, &x_[t * E], L0.attn_norm, L0.attn_norm_b, E, &xn_[t * E]);
  });
}

// A read faults in the whole page-cache folio around the row (up to 2 MiB, the largest
// folio), not its page: the 2 MiB-aligned window around the row leaves again, clipped to
// the table.
void Model::release_embedding_row(int32_t token) const {
  const WeightView& e = weights_.tok_embd;
  constexpr uintptr_t kWindow = uintptr_t{2} << 20;
  const auto table = reinterpret_cast<uintptr_t>(e.data);
  const uintptr_t table_end = table + static_cast<uintptr_t>(e.row_stride) * static_cast<uintptr_t>(e.rows);
  const uintptr_t row = table + static_cast<uintptr_t>(token) * e.row_stride;
  const uintptr_t begin = std::max(table, row / kWindow * kWindow);
  const uintptr_t end = std::min(table_end, (row + e.row_stride + kWindow - 1) / kWindow * kWindow);
  MappedFile::drop_range(reinterpret_cast<const uint8_t*>(begin), end - begin);
}

// Self-attention of layer l on the normed input xn_ (on the residual x_ itself in a layer
// without pre-norms): Q/K/V (with the architecture's bias and QK-norm), RoPE, the KV store
// through each token's block table, paged attention and the output projection; adds the
// result to x_ and leaves the FFN norm of x_ in xn_.
Status Model::attention_block(int32_t l, int64_t n, KvStorage& kv) {
  const ModelConfig& c = config_;
  ThreadPool& pool = *pool_;
  const LayerWeights& L = weights_.layers[l];
  const bool local = c.layer_is_local[l];
  const RopeParams& rope = local ? c.rope_local : c.rope;
  const int32_t group = kv.layout().group_of(l);
  const int32_t shift = kv.block_shift();
  const int32_t mask = kv.shape().block_size - 1;
  const int64_t E = c.n_embd;
  // This process's heads (all of them in one process).
  const int32_t n_q = static_cast<int32_t>(split_.q_heads.size()), n_kv = kv_heads_held();
  const int64_t qd = int64_t{n_q} * c.head_dim, kvd = int64_t{n_kv} * c.head_dim;
  const float* in = L.attn_norm != nullptr ? xn_.data() : x_.data();
  const bool qk_norm_full = c.arch->tensors.qk_norm_full;
  if (observer_) observer_(l, LinearInput::kAttention, in, n, E, -1);
  {
    const WeightView* ws[] = {&L.wq, &L.wk, &L.wv};
    float* ys[] = {q_.data(), k_.data(), v_.data()};
    matmul_shared_input(ws, in, n, ys, pool);
  }
  // Each token's keys and values go to its slot through its sequence's block table.
  for_each_token(pool, n, qd + 2 * kvd, [&](int64_t t) {
    float* qt = &q_[t * qd];
    float* kt = &k_[t * kvd];
    float* vt = &v_[t * kvd];
    if (L.bq != nullptr) add_inplace(qt, L.bq, qd);
    if (L.bk != nullptr) add_inplace(kt, L.bk, kvd);
    if (L.bv != nullptr) add_inplace(vt, L.bv, kvd);
    if (L.q_norm != nullptr && qk_norm_full) {
      rms_norm(qt, L.q_norm, qd, c.norm_eps, qt);
      rms_norm(kt, L.k_norm, kvd, c.norm_eps, kt);
    } else if (L.q_norm != nullptr) {
      for (int32_t h = 0; h < n_q; ++h) rms_norm(qt + h * c.head_dim, L.q_norm, c.head_dim, c.norm_eps, qt + h * c.head_dim);
      for (int32_t h = 0; h < n_kv; ++h)
        rms_norm(kt + h * c.head_dim, L.k_norm, c.head_dim, c.norm_eps, kt + h * c.head_dim);
    }
    const int32_t pos = pos_[t];
    if (!c.layer_skips_rope[l]) rope_apply(qt, n_q, kt, n_kv, c.head_dim, pos, rope);
    const int32_t slot = slot_[t];
    if (!split_.sequence_parallel()) kv.store(l, tables_[t][group][slot >> shift], slot & mask, kt, vt);
  });
  // Sequence parallel: every rank stores every token's keys and values before any query
  // reads them.
  if (split_.sequence_parallel()) PAGODA_TRY(store_gathered_kv(l, n, kv));
  AttentionParams ap;
  ap.n_heads = n_q;
  ap.n_kv_heads = n_kv;
  ap.head_dim = c.head_dim;
  ap.scale = c.attn_scale;
  ap.window = local ? c.sliding_window : 0;
  ap.softcap = c.attn_softcap;
  attention_paged(q_.data(), std::span<const AttnSeq>(attn_seqs_).subspan(group * n_attn_seqs_, n_attn_seqs_),
                  kv.layer(l), ap,
                  att_.data(), pool);
  if (observer_) observer_(l, LinearInput::kAttentionOutput, att_.data(), n, qd, -1);
  PAGODA_TRY(row_split_matmul(L.wo, att_.data(), split_.attn, n, pool));
  residual_add(L.bo, L.post_attn_norm, L.attn_out_norm, L.attn_out_norm_b, L.ffn_norm, L.ffn_norm_b, n);
  return Status::ok();
}

// proj_ = w x for n rows of x. Split by tensor parallelism, each rank holds the columns
// `parts` of x (its heads' or FFN slice's) and w's rows of its embedding slice: x is
// gathered whole first, then each rank's rows of the product, so every value is the
// one-process dot product.
Status Model::row_split_matmul(const WeightView& w, const float* x, std::span<const Range> parts, int64_t n,
                               ThreadPool& pool) {
  if (!split_.tensor_parallel()) {
    matmul(w, x, n, proj_.data(), pool);
    return Status::ok();
  }
  counts_.clear();
  for (const Range& r : parts) counts_.push_back(r.size());
  PAGODA_TRY(comm_->gather_columns(x, n, counts_, tp_in_.data()));
  matmul(w, tp_in_.data(), n, tp_out_.data(), pool);
  counts_.clear();
  for (const Range& r : split_.embd) counts_.push_back(r.size());
  return comm_->gather_columns(tp_out_.data(), n, counts_, proj_.data());
}

// The dense FFN of layer l on xn_ (on x_ without a pre-norm): gated (SwiGLU or GeGLU,
// act(gate) * up) or, without a gate, GELU of up, with the matrices' biases; adds the
// result to x_ and leaves the next layer's attention norm of x_ in xn_. An MoE layer gets
// a block of its own beside this one.
Status Model::ffn_block(int32_t l, int64_t n) {
  const ModelConfig& c = config_;
  ThreadPool& pool = *pool_;
  const LayerWeights& L = weights_.layers[l];
  const float* in = L.ffn_norm != nullptr ? xn_.data() : x_.data();
  const bool gated = !L.gate.empty();
  if (observer_) observer_(l, LinearInput::kFfn, in, n, c.n_embd, -1);
  if (gated) {
    const WeightView* ws[] = {&L.gate, &L.up};
    float* ys[] = {gate_.data(), up_.data()};
    matmul_shared_input(ws, in, n, ys, pool);
  } else {
    matmul(L.up, in, n, up_.data(), pool);
  }
  const int64_t F = split_.ffn[static_cast<size_t>(split_.tp_rank)].size();  // this process's rows
  float* h = gated ? gate_.data() : up_.data();  // the down projection's input
  for_each_token(pool, n, F, [&](int64_t t) {
    float* g = &gate_[t * F];
    float* u = &up_[t * F];
    if (L.b_up != nullptr) add_inplace(u, L.b_up, F);
    if (!gated) {
      gelu_inplace(u, F);  // Model::load allows no other ungated activation
      return;
    }
    if (L.b_gate != nullptr) add_inplace(g, L.b_gate, F);
    if (c.act == FfnActivation::kGeluTanh) geglu(g, u, F);
    else swiglu(g, u, F);
  });
  if (observer_) observer_(l, LinearInput::kFfnDown, h, n, F, -1);
  PAGODA_TRY(row_split_matmul(L.down, h, split_.ffn, n, pool));
  const LayerWeights* next = l + 1 < c.n_layer ? &weights_.layers[l + 1] : nullptr;
  residual_add(L.b_down, L.post_ffw_norm, L.layer_out_norm, L.layer_out_norm_b,
               next != nullptr ? next->attn_norm : nullptr, next != nullptr ? next->attn_norm_b : nullptr, n);
  return Status::ok();
}

// x_ += post_norm(proj_ + bias) * residual_scale (each when the architecture has it), x_ =
// res_norm(x_) (BERT's post-LN), then xn_ = the next sub-block's norm of x_ while the row
// is in cache (none after the last layer, nor before a sub-block without a pre-norm).
void Model::residual_add(const float* bias, const float* post_norm, const float* res_norm, const float* res_norm_b,
                         const float* next_norm, const float* next_norm_b, int64_t n) {
  const ModelConfig& c = config_;
  const int64_t E = c.n_embd;
  for_each_token(*pool_, n, E, [&](int64_t t) {
    float* p = &proj_[t * E];
    if (bias != nullptr) add_inplace(p, bias, E);
    if (post_norm != nullptr) rms_norm(p, post_norm, E, c.norm_eps, p);
    if (c.residual_scale != 1.0f) scale_inplace(p, c.residual_scale, E);
    add_inplace(&x_[t * E], p, E);
    if (res_norm != nullptr) layer_norm(&x_[t * E], res_norm, res_norm_b, E, c.norm_eps, &x_[t * E]);
    if (next_norm != nullptr) norm_row(c, &x_[t * E], next_norm, next_norm_b, E, &xn_[t * E]);
  });
}

// The rows that produce logits, normalized into consecutive rows of xn_, times the output
// matrix.
Status Model::output_logits(std::span<const BatchSeq> seqs, float* logits, bool all_logits) {
  const ModelConfig& c = config_;
  const int64_t E = c.n_embd;
  int64_t rows = 0;
  int64_t t0 = 0;
  for (const BatchSeq& s : seqs) {
    if (all_logits) {
      for (int32_t j = 0; j < s.n_tokens; ++j, ++rows)
        norm_row(c, &x_[(t0 + j) * E], weights_.output_norm, weights_.output_norm_b, E, &xn_[rows * E]);
    } else if (s.logits) {
      for (int32_t j = s.n_tokens - s.logit_rows; j < s.n_tokens; ++j, ++rows)
        norm_row(c, &x_[(t0 + j) * E], weights_.output_norm, weights_.output_norm_b, E, &xn_[rows * E]);
    }
    t0 += s.n_tokens;
  }
  if (rows == 0) return Status::ok();
  if (hidden_out_) {
    std::copy_n(xn_.data(), rows * E, logits);
    return Status::ok();
  }
  // Split by tensor or pipeline parallelism, this rank's slice of the vocabulary (all of
  // it on a last stage without tensor ranks), for rank 0 to collect.
  const bool split = split_.tensor_parallel() || split_.pipelined();
  const int64_t V = weights_.output.rows;
  if (split) tp_logits_.resize(static_cast<size_t>(rows * V));
  float* out = split ? tp_logits_.data() : logits;
  head_logits(weights_.output, xn_.data(), rows, out);
  return split ? collect_split_logits(out, rows, logits) : Status::ok();
}

// The logits of a model split by tensor or pipeline parallelism: the last stage's ranks
// send their vocabulary slices (`slice`, rows x its width; null on a rank that only
// receives), rank 0 collects them whole, or only each rank's k best (logit, id) when the
// step reads nothing else.
Status Model::collect_split_logits(const float* slice, int64_t rows, float* logits) {
  const int64_t T = split_.tp_size;
  const int64_t k = top_k_;
  counts_.clear();
  for (const Range& r : split_.vocab) counts_.push_back(k > 0 ? 2 * k : r.size());
  const bool root = split_.root();
  if (k > 0 && root) best_all_.resize(static_cast<size_t>(rows * 2 * k * T));
  float* dest = k > 0 ? best_all_.data() : logits;
  const float* send = slice;
  if (slice != nullptr && k > 0) {
    row_best(slice, rows, weights_.output.rows, split_.vocab[static_cast<size_t>(split_.tp_rank)].begin);
    send = best_.data();
  }
  PAGODA_TRY(comm_->collect_logits(send, rows, counts_, dest));
  if (k > 0 && root) expand_best(best_all_.data(), rows, k * T, logits);
  return Status::ok();
}

// Every token of the row's top k (under sampling's order: higher logit, then lower id)
// is among its own rank's top k, so the union of the ranks' lists holds the row's top k.
void Model::row_best(const float* logits, int64_t rows, int64_t width, int64_t col0) {
  const int64_t k = top_k_;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  best_.assign(static_cast<size_t>(rows * 2 * k), kNegInf);
  // A min-heap of the k best so far under (logit, lower id first); most entries fail the
  // comparison with its top, so a row costs one scan. Rows split over the pool.
  auto worse = [](const std::pair<float, int64_t>& a, const std::pair<float, int64_t>& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  for_each_token(*pool_, rows, width, [&](int64_t r) {
    const float* row = logits + r * width;
    std::vector<std::pair<float, int64_t>> heap;
    heap.reserve(static_cast<size_t>(k));
    for (int64_t i = 0; i < width; ++i) {
      const float v = row[i];
      if (!(v > kNegInf)) continue;  // -inf and NaN are never candidates
      if (static_cast<int64_t>(heap.size()) < k) {
        heap.emplace_back(v, i);
        std::push_heap(heap.begin(), heap.end(), worse);
      } else if (v > heap.front().first) {  // equal logits: the earlier (lower) id stays
        std::pop_heap(heap.begin(), heap.end(), worse);
        heap.back() = {v, i};
        std::push_heap(heap.begin(), heap.end(), worse);
      }
    }
    float* out = best_.data() + r * 2 * k;
    for (size_t j = 0; j < heap.size(); ++j) {
      out[2 * j] = heap[j].first;
      // Ids are below 2^24 (Model::load), so a float holds them exactly.
      out[2 * j + 1] = static_cast<float>(col0 + heap[j].second);
    }
  });
}

void Model::expand_best(const float* pairs, int64_t rows, int64_t pairs_per_row, float* logits) const {
  const int64_t V = config_.n_vocab;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  for_each_token(*pool_, rows, V, [&](int64_t r) {
    float* row = logits + r * V;
    std::fill(row, row + V, kNegInf);
    const float* p = pairs + r * 2 * pairs_per_row;
    for (int64_t j = 0; j < pairs_per_row; ++j)
      if (p[2 * j] > kNegInf) row[static_cast<int64_t>(p[2 * j + 1])] = p[2 * j];
  });
}

}  // namespace pagoda

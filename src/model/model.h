// A loaded model: config, weights bound into the GGUF mapping, and the forward pass.
// forward(batch) runs one engine step: the tokens of any number of sequences (prefill
// chunks and decode tokens) through every layer as one batch, so every weight matrix is
// read once per step for all of them; each sequence's keys/values are written to and read
// from the paged KV storage through its block table. The single-sequence forward() is the
// same path with a contiguous table. The model holds scratch buffers, so one Model runs
// one forward at a time (the engine loop's thread).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "base/status.h"
#include "base/thread_pool.h"
#include "kernels/matmul/matmul.h"
#include "kv/kv_storage.h"
#include "model/batch.h"
#include "model/config.h"
#include "model/kv_cache.h"
#include "model/linear_input.h"
#include "model/moe_stats.h"
#include "model/parallel.h"
#include "model/weight_packing.h"
#include "model/weights.h"

namespace pagoda {

class GgufFile;

// Sees each such input (n_tokens rows of cols floats) just before its matrices run.
// expert: -1 for the layer's own matrices (an MoE layer's kFfn is the input its router and
// shared expert read, its kFfnDown the shared expert's), else the expert whose gate/up
// (kFfn) or down (kFfnDown) read these rows: the tokens routed to it.
using ActivationObserver = std::function<void(int32_t layer, LinearInput input, const float* x, int64_t n_tokens,
                                              int64_t cols, int32_t expert)>;

class Model {
 public:
  // The file must outlive the model (weights point into its mapping).
  // repack: whether matrices are repacked where that pays (model/weight_packing.h); off
  // for a model loaded only to be described or read, never run at speed.
  // where: this process's place when the model runs over several (model/parallel.h): it
  // holds and repacks only its rows and layers, and runs only with set_comm.
  static Result<std::unique_ptr<Model>> load(const GgufFile& file, ThreadPool& pool, bool repack = true,
                                             ParallelRank where = {});
  const ParallelSplit& split() const { return split_; }
  // The transport a split model's forward passes run over (outlives the model's use).
  void set_comm(ModelComm* comm) { comm_ = comm; }
  // The KV heads this process stores (all of them unless split by tensor parallelism).
  int32_t kv_heads_held() const { return static_cast<int32_t>(split_.kv_heads.size()); }

  const ModelConfig& config() const { return config_; }
  ThreadPool& pool() const { return *pool_; }
  const ModelWeights& weights() const { return weights_; }
  KvCache make_cache(int32_t n_ctx) const { return KvCache(config_.n_layer, n_ctx, config_.n_head_kv, config_.head_dim); }
  // What depends on how long a sequence may grow (llama.cpp's per-sequence n_ctx): with
  // LongRoPE (Phi-3), the long RoPE factors when n_ctx exceeds
  // rope.scaling.original_context_length, else the short ones. Load chooses for the
  // trained context; call before running, never during a forward.
  void set_context_length(int32_t n_ctx);
  size_t weight_bytes() const { return weight_bytes_; }
  // The activation buffers a forward of `tokens` tokens in one step allocates (steps are
  // cut into pieces of at most 512 tokens); they are kept for the model's lifetime.
  static size_t scratch_bytes(const ModelConfig& c, int64_t tokens);
  // Under tensor parallelism, the two buffers of gathered activations a step of `tokens`
  // allocates, together.
  static size_t tp_scratch_bytes(const ModelConfig& c, int64_t tokens);
  // What load-time repacking did (nothing when loaded with repack off).
  const PackingReport& packing() const { return packing_; }
  // Calibration for quantization (AWQ, GPTQ) records the activations the layers see; an
  // unset observer costs one branch per group of matrices.
  void set_activation_observer(ActivationObserver observer) { observer_ = std::move(observer); }
  // Sees each MoE layer's choices (n_tokens x n_expert_used expert ids, most probable
  // first, tokens in batch order) as they are made; for oracle comparisons
  // (`pagoda run --moe-routing-out`). Unset it costs one branch per layer.
  using RoutingObserver = std::function<void(int32_t layer, int64_t n_tokens, const int32_t* ids)>;
  void set_routing_observer(RoutingObserver observer) { routing_observer_ = std::move(observer); }
  // Expert statistics of an MoE model since load or the last reset (empty otherwise).
  const MoeStats& moe_stats() const { return moe_stats_; }
  void reset_moe_stats() { moe_stats_.reset(config_.n_layer, config_.n_expert, config_.n_expert_used); }

  // One step. logits: n_vocab floats for each of the last logit_rows tokens of every
  // sequence whose BatchSeq::logits is set, in batch order (Batch::n_logits() rows).
  // pooled: n_embd floats for every sequence with a BatchSeq::pool, in batch order
  // (Batch::n_pooled() rows): the final hidden states (after the output norm, when the
  // model has one) pooled over the sequence's tokens in this batch; under rank pooling the
  // row starts with the classification head's n_cls_out scores (zeros after). An encoder
  // (config().causal false) takes each sequence whole from position 0. Fails, changing
  // nothing, on token ids outside the vocabulary, block tables that do not cover a
  // sequence's positions, block ids outside the storage, logits from a model without an
  // output head, or an encoder's sequence that is not whole, rank pooling without a
  // classification head, or a text pair (BatchSeq::segment_b) with fewer than two token types.
  // Split over processes (load's ParallelRank), rank 0 calls it with the engine's batch and
  // first ships it to the other ranks, which call it with the same batch and null logits;
  // rank 0 alone receives logits, bit-identical to one process's (under
  // Batch::top_candidates, -inf but at each row's best tokens). A transfer that fails (a rank
  // lost) fails the step.
  Status forward(const Batch& batch, KvStorage& kv, float* logits, float* pooled = nullptr);

  // logits: n_vocab floats for the last token, or n_tokens * n_vocab with all_logits.
  // Fails (changing nothing) on token ids outside the vocabulary or when the tokens do
  // not fit in the cache.
  Status forward(std::span<const int32_t> tokens, int32_t pos0, KvCache& kv, float* logits,
                 bool all_logits = false);
  // The same pass, giving every token's final hidden state as the output head reads it
  // (after the output norm): n_tokens * n_embd floats. With head_logits, a caller makes
  // logits over any rows of the head (model/output_subset.h) or the whole of it. Fails as
  // forward does, and on a model without an output head.
  Status forward_hidden(std::span<const int32_t> tokens, int32_t pos0, KvCache& kv, float* hidden);
  // out = the logits of `rows` hidden states (forward_hidden's) under `head`: this model's
  // weights().output or rows of it, with the model's logit scaling and soft-capping.
  void head_logits(const WeightView& head, const float* hidden, int64_t rows, float* out) const;

 private:
  Model() = default;
  // A piece of a batch small enough for the scratch buffers, `seqs` consecutive in
  // `tokens`. Writes logits rows from `logits` on: one per sequence asking for them, or
  // with all_logits one per token.
  Status run_batch(const int32_t* tokens, std::span<const BatchSeq> seqs, KvStorage& kv, float* logits, bool all_logits,
                   float* pooled = nullptr);
  Status run_timed(const int32_t* tokens, std::span<const BatchSeq> seqs, KvStorage& kv, float* logits, bool all_logits,
                 float* pooled = nullptr);
  Status forward_chunk(const int32_t* tokens, std::span<const BatchSeq> seqs, KvStorage& kv, float* logits,
                       bool all_logits, float* pooled);
  // The pooled hidden states of the piece's sequences with a pool, into their rows of
  // pooled (piece_slots_ says which).
  void pool_hidden(std::span<const BatchSeq> seqs, float* pooled);
  // Rank pooling (rank_head.cpp): each row of rank_rows_ (a sequence's first hidden state,
  // n_embd floats) through the classification head, its n_cls_out scores written over the
  // row's start and the rest zeroed.
  void rank_head();
  // The blocks of forward_chunk (decoder.cpp), in order. plan_chunk returns the tokens.
  int64_t plan_chunk(std::span<const BatchSeq> seqs, KvStorage& kv);
  void embed(const int32_t* tokens, int64_t n);
  Status attention_block(int32_t layer, int64_t n, KvStorage& kv);
  // Tokens of s attended one by one (the rows of logits after its first), see plan_chunk.
  static int32_t lone_rows(const BatchSeq& s) { return s.logits && s.logit_rows > 1 ? s.logit_rows : 0; }
  Status ffn_block(int32_t layer, int64_t n);
  // Sequence parallelism (sequence_parallel.cpp): this rank's tokens of the piece through
  // every layer, keys and values gathered from every rank per layer, logits rows sent to
  // rank 0.
  Status forward_chunk_sp(const int32_t* tokens, std::span<const BatchSeq> seqs, KvStorage& kv, float* logits);
  Status store_gathered_kv(int32_t layer, int64_t n_local, KvStorage& kv);
  Status collect_split_logits(const float* slice, int64_t rows, float* logits);
  Status row_split_matmul(const WeightView& w, const float* x, std::span<const Range> parts, int64_t n,
                          ThreadPool& pool);
  Status moe_block(int32_t layer, int64_t n);  // moe_block.cpp
  Status moe_down_split(int32_t layer, int64_t n, int64_t shared_cols);
  void residual_add(const float* bias, const float* post_norm, const float* res_norm, const float* res_norm_b,
                    const float* next_norm, const float* next_norm_b, int64_t n);
  Status output_logits(std::span<const BatchSeq> seqs, float* logits, bool all_logits);
  void ensure_scratch(int64_t n);
  void release_embedding_row(int32_t token) const;

  // During forward_hidden: output_logits writes the normalized rows there, no logits.
  bool hidden_out_ = false;
  int64_t row_width() const { return hidden_out_ ? config_.n_embd : weights_.output.rows; }

  ModelConfig config_;
  ModelWeights weights_;
  ParallelSplit split_;      // one process: every head, row and layer
  ModelComm* comm_ = nullptr;
  // Tensor parallelism's gathered inputs of the row-split matrices (attention output, FFN
  // activations), their local outputs, and the local slice of the logits.
  std::vector<float> tp_in_, tp_out_, tp_logits_;
  std::vector<int64_t> counts_;
  // The step's Batch::top_candidates, and each row's best (logit, id) pairs: this rank's,
  // then on rank 0 every rank's.
  int32_t top_k_ = 0;
  std::vector<float> best_, best_all_;
  // Each row's top_k_ best (logit, id as float) of rows x width logits whose first column
  // is vocabulary id col0, into best_ (padded with -inf).
  void row_best(const float* logits, int64_t rows, int64_t width, int64_t col0);
  // Rank 0: rows of -inf but at every pair the ranks sent.
  void expand_best(const float* pairs, int64_t rows, int64_t pairs_per_row, float* logits) const;
  // Sequence parallelism: the piece's tokens per rank, every token's position and block
  // tables, the gathered keys/values, this rank's sub-sequences and its logits rows.
  std::vector<int64_t> sp_tokens_;
  std::vector<int32_t> sp_pos_;
  std::vector<const std::vector<BlockId>*> sp_tables_;
  std::vector<float> sp_k_, sp_v_, sp_logits_;
  std::vector<BatchSeq> sp_local_;
  ThreadPool* pool_ = nullptr;
  size_t weight_bytes_ = 0;
  PackingReport packing_;
  // The embedding table lies in the file's mapping and nothing else reads its rows (it is
  // untied, or tied with the output head packed): embed() lets each row's pages go once
  // read, so the table costs no resident memory however many distinct tokens are seen (a
  // fault maps a whole page-cache folio, hundreds of KiB, around each row read).
  bool release_embedding_rows_ = false;
  // Scratch for a chunk of up to scratch_tokens_ tokens.
  int64_t scratch_tokens_ = 0;
  std::vector<float> x_, xn_, q_, k_, v_, att_, proj_, gate_, up_;
  // An MoE layer's: router logits, then per (token, selected expert) row, grouped by
  // expert, its input, gate, up and down output; the selections and each one's row.
  std::vector<float> router_logits_, moe_x_, moe_gate_, moe_up_, moe_down_;
  std::vector<int32_t> moe_ids_, moe_rows_;
  std::vector<float> moe_weights_;
  std::vector<int32_t> moe_offsets_, moe_cursor_;
  std::vector<MatmulJob> moe_jobs_;
  MoeStats moe_stats_;
  std::vector<int32_t> pos_;   // each token's position (RoPE, learned positions)
  std::vector<int32_t> slot_;  // where its keys and values go: its position but in a draft tree
  std::vector<uint8_t> types_;  // each token's token type (BatchSeq::segment_b)
  std::vector<const std::vector<BlockId>*> tables_;  // each token's block tables, per layer group
  std::vector<uint64_t> tree_masks_;   // plan_chunk's scratch for a draft tree's rows
  std::vector<int32_t> tree_depths_;
  std::vector<AttnSeq> attn_seqs_;  // per layer group, n_attn_seqs_ each
  size_t n_attn_seqs_ = 0;
  std::vector<BatchSeq> pieces_;
  std::vector<int32_t> piece_slots_;  // per piece: its sequence's row of pooled (-1: none)
  std::vector<float> pool_row_;
  std::vector<float*> rank_rows_;        // the piece's rank-pooled rows, awaiting the head
  std::vector<float> rank_in_, rank_mid_, rank_out_;
  ActivationObserver observer_;
  RoutingObserver routing_observer_;
  // PAGODA_MOE_STATS=0 turns the expert statistics off, only to measure what they cost.
  bool moe_stats_on_ = true;
};

}  // namespace pagoda

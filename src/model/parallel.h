// How one model is split over several processes (src/dist runs them over MPI): tensor
// parallel within a stage (each rank holds whole attention heads and their KV heads, a
// slice of the FFN's rows, of the projections' output rows and of the vocabulary), and a
// pipeline of stages over contiguous layer ranges. Every matrix is split by output rows
// only, and what a row-split matrix produces is gathered whole before anything reads
// it, so each value is computed by the same dot product, in the same order, as in one
// process: the split changes which process computes a number, never the number
// (docs/parallel.md). The cost is four all-gathers per layer instead of Megatron's two
// all-reduces. A mixture-of-experts layer splits every expert the way a dense FFN is
// split; its router runs whole on every rank, so every rank routes every token alike.
//
// ParallelSplit is plain data, the same on every rank (a pure function of the config and
// the sizes). ModelComm is what the forward pass needs from the transport; its calls
// block, run on the engine's thread and fail (never hang past their deadline) when a
// peer is gone.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"

namespace pagoda {

struct Batch;
class KvStorage;
struct ModelConfig;
struct ModelWeights;

// Where this process sits: tp x pp processes, this one's world rank.
struct ParallelRank {
  int32_t tp = 1, pp = 1, rank = 0, sp = 1;
};

// [begin, end) of something split over ranks.
struct Range {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
};

struct ParallelSplit {
  int32_t tp_size = 1, tp_rank = 0;
  int32_t pp_size = 1, pp_rank = 0;
  // Sequence parallel: every rank holds the whole model and every key/value; each step's
  // tokens are cut into sp_size contiguous ranges, one per rank, whose keys/values are
  // gathered layer by layer so each rank's queries see every earlier key.
  int32_t sp_size = 1, sp_rank = 0;
  // This rank's query heads and the KV heads they read (a KV head is held by every rank
  // whose query heads read it when there are fewer KV heads than ranks).
  Range q_heads, kv_heads;
  // Per tensor-parallel rank, in rank order: its part of the embedding width (the output
  // rows of the attention output and down projections), of the attention output's width
  // (its query heads x head_dim), of the FFN width and of the vocabulary.
  std::vector<Range> embd, attn, ffn, vocab;
  // A mixture-of-experts layer: the same for every expert's width (the rows of its gate
  // and up; its down by embd, like the dense down) and for the shared expert's.
  std::vector<Range> ffn_exp, ffn_shexp;
  Range layers;  // this stage's layers

  bool tensor_parallel() const { return tp_size > 1; }
  bool pipelined() const { return pp_size > 1; }
  bool sequence_parallel() const { return sp_size > 1; }
  bool split() const { return tensor_parallel() || pipelined() || sequence_parallel(); }
  bool root() const { return tp_rank == 0 && pp_rank == 0 && sp_rank == 0; }
  bool first_stage() const { return pp_rank == 0; }
  bool last_stage() const { return pp_rank == pp_size - 1; }
  // The world rank of tensor rank t of stage s (stages are consecutive groups of ranks).
  int32_t world_rank(int32_t stage, int32_t t) const { return stage * tp_size + t; }
  // [begin, end) of n tokens that sequence rank r computes.
  Range tokens_of(int64_t n, int32_t r) const { return Range{n * r / sp_size, n * (r + 1) / sp_size}; }
};

// The split of c over tp x pp ranks for world rank `rank`, or why the model cannot be
// split that way (heads that do not divide, QK-norm over whole rows, fewer layers than
// stages).
// With sp > 1 (sequence parallelism) tp and pp must be 1.
Result<ParallelSplit> plan_split(const ModelConfig& c, int32_t tp, int32_t pp, int32_t rank, int32_t sp = 1);

// Narrows w to what this rank computes: its rows of every matrix and bias, and empty
// views for the layers of other stages, so neither loading nor repacking touches them.
void split_weights(const ParallelSplit& s, const ModelConfig& c, ModelWeights& w);

// The transport, implemented over MPI in src/dist. "Tensor" calls run among the ranks of
// this rank's stage, "stage" calls between neighbouring stages.
class ModelComm {
 public:
  virtual ~ModelComm() = default;
  // Rank 0 only, first in every step: ships the step's plan (and the KV copies since the
  // last one) to every other rank.
  virtual Status begin_step(const Batch& batch, KvStorage& kv) = 0;
  // Every tensor rank's rows x counts[rank] block, concatenated in rank order along the
  // columns: out is rows x sum(counts), row-major.
  virtual Status gather_columns(const float* mine, int64_t rows, std::span<const int64_t> counts, float* out) = 0;
  // The residual stream to the next stage / from the previous one (each tensor rank with
  // its peer of the same tensor rank).
  virtual Status send_next(const float* x, int64_t n) = 0;
  virtual Status recv_prev(float* x, int64_t n) = 0;
  // Sequence parallel: every rank's rows x width block (counts[r] rows for rank r),
  // concatenated in rank order, on every rank.
  virtual Status gather_rows(const float* mine, std::span<const int64_t> counts, int64_t width, float* out) = 0;
  // Sequence parallel: every rank's rows x width block to world rank 0 only, in rank order.
  virtual Status gather_rows_to_root(const float* mine, std::span<const int64_t> counts, int64_t width,
                                     float* out) = 0;
  // The last stage's rows x vocab slices of logits to world rank 0, which assembles
  // them; on rank 0 `out` receives rows x sum(counts) (mine is ignored unless rank 0 is
  // also on the last stage).
  virtual Status collect_logits(const float* mine, int64_t rows, std::span<const int64_t> counts, float* out) = 0;
  // Bytes this rank sent since the last reset, and seconds spent waiting in the calls.
  virtual int64_t bytes_sent() const = 0;
  virtual double comm_seconds() const = 0;
};

}  // namespace pagoda

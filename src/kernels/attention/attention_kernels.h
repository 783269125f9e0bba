// Internal: the per-target bodies behind attention_causal (attention.h). The front splits
// the work into units, each a few consecutive query tokens' group of heads that share a KV
// head, and hands every unit to a body compiled for one SIMD target. A unit is computed exactly as
// attention.h's contract says (FP16-rounded q, float q.k, max-subtracted softmax with exp
// and a double sum, FP16-rounded probabilities times FP16 V, float accumulation); the
// bodies differ from one another only in the order of the float sums.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>

#include "kernels/attention/attention.h"
#include "kernels/simd/simd_target.h"

namespace pagoda::attn {

// Keys per tile of the tiled (flash) path, and the context length from which a unit takes
// it: below, a unit keeps whole score rows (the exact llama.cpp softmax order); above,
// scratch stops growing with the context.
inline constexpr int32_t kTileKeys = 256;
inline constexpr int32_t kTiledMinKeys = 2048;
// Split-KV decode: a long context is cut into parts of at least this many keys, run in
// parallel and merged, when there are too few (sequence, KV head) units to fill the threads.
inline constexpr int32_t kSplitMinKeys = 1024;

// The state of one query row over part of the keys (split-KV): running max, sum of
// exp(s - m) and the unnormalized value accumulator (head_dim floats).
struct PartialRow {
  float m = 0;
  float l = 0;
  float* acc = nullptr;
};

struct Unit {
  // n_tokens consecutive query tokens, each with n_heads query rows of head_dim floats
  // (back to back); token t's rows at q + t * q_stride, its output at out + t * q_stride.
  const float* q = nullptr;
  float* out = nullptr;
  int64_t q_stride = 0;
  int32_t n_tokens = 1;
  int32_t n_heads = 0;
  int32_t head_dim = 0;
  // Paged keys and values: position j lives in block table[j >> shift], slot j & mask;
  // its key row at byte k + table[j >> shift] * block_stride + (j & mask) * kv_stride (k
  // and v already point at the unit's KV head), its value row likewise from v. The row
  // of a head is head_dim FP16 values, or (i8) a float scale and head_dim int8 values.
  const uint8_t* k = nullptr;
  const uint8_t* v = nullptr;
  bool i8 = false;
  const int32_t* table = nullptr;
  int32_t shift = 0;
  int32_t mask = 0;
  int64_t block_stride = 0;
  int64_t kv_stride = 0;
  // The first token sits at position hi and sees keys lo..hi; token t sits at hi + t and
  // sees keys from max(lo, hi + t - window + 1) (window > 0) or lo (window 0).
  int32_t lo = 0, hi = 0;
  int32_t window = 0;
  // A draft tree's node (AttnSeq::tree; the unit has one token): among the keys from
  // tree_base on, only those whose bit (key - tree_base) is set are seen; the others'
  // scores become -inf after any soft-capping (mask_tree_keys), so they weigh 0.
  uint64_t tree = 0;
  int32_t tree_base = 0;
  // >= 0: every token sees keys up to this position (an encoder's whole sequence), not
  // just up to its own.
  int32_t key_last = -1;
  float scale = 1.0f;
  // > 0: each score row a token reads is soft-capped (elementwise.h's softcap) before its
  // softmax; 0 costs one comparison per row.
  float softcap = 0.0f;
  // Which way a SIMD body sums q.k (attention_body.h): the front decides from the call's
  // shape alone, so results never depend on how the work was split over threads.
  bool rows_in_lanes = false;
  // scratch_floats(n_tokens * n_heads, head_dim, len) floats, len = the keys any token of
  // the unit sees (hi + n_tokens - lo): rows of scores score_stride(len) floats apart, then
  // room for the queries.
  float* scratch = nullptr;
  size_t ld = 0;  // score_stride(len), or score_stride(kTileKeys) when tiled
  // Tiled (flash) mode: keys klo..khi only, in tiles, with an online softmax; scratch as
  // tiled_scratch_floats. With `partial` (one per query row), the row states go there
  // instead of the normalized output to `out`.
  bool tiled = false;
  int32_t klo = 0, khi = 0;
  PartialRow* partial = nullptr;
};

// Scratch sizes, for the front only (the SIMD files call no shared inline function, so the
// linker can never keep their copy for code that runs on other CPUs). A score row has 16
// floats of padding past a multiple of 16, so a body may write whole vectors past the end
// of a row that starts anywhere in its first 16 floats.
static inline size_t score_stride(int32_t len) { return ((static_cast<size_t>(len) + 15) & ~static_cast<size_t>(15)) + 16; }
static inline size_t scratch_floats(int32_t rows, int32_t head_dim, int32_t len) {
  return static_cast<size_t>(rows) * score_stride(len) + static_cast<size_t>(rows + 48) * static_cast<size_t>(head_dim);
}

static inline size_t tiled_scratch_floats(int32_t rows, int32_t head_dim) {
  return scratch_floats(rows, head_dim, kTileKeys) + static_cast<size_t>(rows + 8) * static_cast<size_t>(head_dim) +
         2 * static_cast<size_t>(rows) + 64;
}

// Sets the scores of the keys a tree node does not see to -inf: s[0] is key j0's score,
// keys j0 .. j0 + len - 1. No-op outside a tree unit.
static inline void mask_tree_keys(const Unit& u, float* s, int32_t j0, int32_t len) {
  if (u.tree == 0) return;
  const int32_t from = j0 > u.tree_base ? j0 : u.tree_base;
  for (int32_t j = from; j < j0 + len; ++j) {
    const int32_t bit = j - u.tree_base;
    if (bit >= 64 || ((u.tree >> bit) & 1u) == 0) s[j - j0] = -INFINITY;
  }
}

using Body = void (*)(const Unit& u);

// Bodies per target; a SIMD body needs head_dim to be a multiple of its lane count (8 for
// avx2, 16 for avx512) and the front falls back otherwise.
void attend_scalar(const Unit& u);
void attend_avx2(const Unit& u);
void attend_avx512(const Unit& u);

// The body attention_causal uses on `target` (which must be runnable here) for this head
// size: the target's own when head_dim suits it, else the next lower one that fits.
Body body_for(SimdTarget target, int32_t head_dim);

// attention_causal / attention_paged with a given body: for tests and benchmarks.
void run(Body body, const float* q, int64_t n_tokens, int32_t pos0, const uint16_t* k, const uint16_t* v,
         const AttentionParams& p, float* out, ThreadPool& pool);
void run_paged(Body body, const float* q, std::span<const AttnSeq> seqs, const PagedKv& kv,
               const AttentionParams& p, float* out, ThreadPool& pool);

}  // namespace pagoda::attn

// Causal self-attention of chunks of new tokens against their sequences' cached keys and
// values (or bidirectional, for an encoder's whole sequence: AttnSeq::bidirectional): FP16 rows of n_kv_heads * head_dim values, in fixed-size blocks that each
// sequence reaches through its block table (paged attention), or contiguous for one
// sequence (attention_causal). Each query computes one row
// of scores at a time (never the whole score matrix), so memory is linear in context
// length; numerics follow llama.cpp's CPU path (FP16 q.k, softmax in float with a double
// sum, probabilities rounded to FP16 before the V product). GQA/MQA: query head h reads
// KV head h / (n_heads / n_kv_heads); KV is never duplicated.
//
// The contract, exactly: q rounded to FP16; s_j = scale * (q . k_j) summed in float,
// then soft-capped when the call has a cap c (s_j = softcap(s_j, c), elementwise.h's
// c * tanh(s_j / c), the same bits in every body; Gemma 2); p_j = expf(s_j - max_j s_j)
// (libm's expf, bit for bit); sum = the p_j added in double;
// w_j = FP16(p_j * float(1 / sum)); out = sum_j w_j v_j in float. Bodies (scalar, avx2,
// avx512; attention_kernels.h) differ only in the order of the float and double sums.
// Work is split over the pool by (sequence, KV head, block of tokens) in one parallel
// region for the whole batch: all query heads of a group,
// and in prefill about 32 / group consecutive tokens, share each K/V row load. Results do
// not depend on the thread count. Cost: O(n_tokens * context * n_heads * head_dim); no
// allocation once each pool thread's scratch (~32 rows of context floats) has grown.
#pragma once

#include <cstdint>
#include <span>

#include "base/thread_pool.h"

namespace pagoda {

struct AttentionParams {
  int32_t n_heads = 0;
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;
  float scale = 1.0f;      // applied to q.k
  int32_t window = 0;      // sliding window: query at p sees keys p-window+1..p; 0 = all
  float softcap = 0.0f;    // > 0: scores become softcap * tanh(score / softcap) before the softmax
};

// How cached keys/values are stored. kF16: a row is n_kv_heads * head_dim FP16 values.
// kI8: a row is, per KV head, a float scale d then head_dim int8 values q (value = d * q,
// d = max|x| / 127 over that head's row): half the memory of FP16, with one scale per
// token and head.
enum class KvType : uint8_t { kF16, kI8 };

// Bytes of one cached row (one position) of n_kv_heads heads.
inline int64_t kv_row_bytes(KvType t, int32_t n_kv_heads, int32_t head_dim) {
  return t == KvType::kF16 ? int64_t{2} * n_kv_heads * head_dim : static_cast<int64_t>(n_kv_heads) * (int64_t{4} + head_dim);
}

// One layer's paged KV memory as the kernel sees it: block b's slot r holds the key row at
// byte k + b * block_stride + r * row_stride, the value row likewise from v. Blocks hold
// 1 << block_shift positions.
struct PagedKv {
  const void* k = nullptr;
  const void* v = nullptr;
  int64_t block_stride = 0;  // bytes
  int64_t row_stride = 0;    // bytes
  int32_t block_shift = 4;
  KvType type = KvType::kF16;
};

// One sequence's share of a batch: its n_tokens query rows start at token q_offset of the
// batch's q/out; they sit at positions pos0.. and see keys 0..pos0 + t through the block
// table (which must cover every position up to pos0 + n_tokens - 1, keys already written).
// bidirectional (an encoder's sequence): every token sees keys 0..pos0 + n_tokens - 1,
// the later tokens' too (no window applies).
//
// tree (non-zero; n_tokens must be 1): a node of a speculative draft tree, verified in the
// same pass as its siblings. Its keys sit at slots as usual, but among the slots from
// tree_base on it sees only those whose bit (slot - tree_base) is set: its ancestors and
// itself. Its position for the sliding window is tree_pos (its depth past tree_base), not
// its slot. The visible keys are exactly those the node would see had the branch been
// decoded alone, in the same order, and masked keys weigh exactly 0.
struct AttnSeq {
  int64_t q_offset = 0;
  int32_t n_tokens = 0;
  int32_t pos0 = 0;
  const int32_t* block_table = nullptr;
  bool bidirectional = false;
  uint64_t tree = 0;
  int32_t tree_base = 0;
  int32_t tree_pos = 0;
};

// q, out: [total tokens, n_heads * head_dim]. Results do not depend on how the sequences
// are batched together or on the thread count.
void attention_paged(const float* q, std::span<const AttnSeq> seqs, const PagedKv& kv, const AttentionParams& p,
                     float* out, ThreadPool& pool);

// q: [n_tokens, n_heads * head_dim]; token t sits at position pos0 + t and sees keys at
// positions [0, pos0 + t] (clipped by the window). k, v: cache rows for positions
// 0..pos0+n_tokens-1, each n_kv_heads * head_dim FP16 values. out: like q.
void attention_causal(const float* q, int64_t n_tokens, int32_t pos0, const uint16_t* k,
                      const uint16_t* v, const AttentionParams& p, float* out, ThreadPool& pool);

}  // namespace pagoda

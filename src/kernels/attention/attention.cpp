// Front of attention_causal: splits the work into units (attention_kernels.h) and runs
// them on the best body for this CPU.
#include "kernels/attention/attention.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <vector>

#include "base/fp16.h"
#include "kernels/attention/attention_kernels.h"
#include "kernels/elementwise/elementwise.h"
#include "kernels/simd/simd_target.h"

namespace pagoda {
namespace attn {

inline const uint8_t* row(const Unit& u, const uint8_t* base, int32_t j) {
  return base + u.table[j >> u.shift] * u.block_stride + static_cast<int64_t>(j & u.mask) * u.kv_stride;
}

// Element i of a cached head row (FP16, or int8 times the row's scale).
inline float kv_at(const Unit& u, const uint8_t* r, int32_t i) {
  if (u.i8) {
    float d;
    std::memcpy(&d, r, sizeof(d));
    return d * static_cast<float>(reinterpret_cast<const int8_t*>(r + sizeof(float))[i]);
  }
  uint16_t h;
  std::memcpy(&h, r + 2 * static_cast<size_t>(i), sizeof(h));
  return fp16_to_fp32(h);
}

// The reference tiled body: one token and head at a time, keys klo..khi in tiles with
// an online softmax (attention_body.h's run_tiled, in order).
void attend_scalar_tiled(const Unit& u) {
  const int32_t hd = u.head_dim;
  float* scores = u.scratch;
  float* acc = u.scratch + u.ld;
  float* qh = acc + hd;
  for (int32_t t = 0; t < u.n_tokens; ++t) {
    const int32_t pos = u.hi + t;
    const int32_t lo = std::max(u.klo, u.window > 0 && u.tree == 0 ? std::max(u.lo, pos - u.window + 1) : u.lo);
    const int32_t hi = std::min(u.key_last >= 0 ? u.key_last : pos, u.khi);
    for (int32_t h = 0; h < u.n_heads; ++h) {
      const float* qs = u.q + t * u.q_stride + static_cast<int64_t>(h) * hd;
      for (int32_t i = 0; i < hd; ++i) qh[i] = fp16_to_fp32(fp32_to_fp16(qs[i]));
      float m = -INFINITY, l = 0.0f;
      std::fill(acc, acc + hd, 0.0f);
      for (int32_t j0 = lo; j0 <= hi; j0 += kTileKeys) {
        const int32_t j1 = std::min(hi, j0 + kTileKeys - 1);
        float mt = -INFINITY;
        for (int32_t j = j0; j <= j1; ++j) {
          const uint8_t* kr = row(u, u.k, j);
          float s = 0.0f;
          for (int32_t i = 0; i < hd; ++i) s += qh[i] * kv_at(u, kr, i);
          scores[j - j0] = s * u.scale;
          if (u.softcap != 0.0f) scores[j - j0] = softcap(scores[j - j0], u.softcap);
          mt = std::max(mt, scores[j - j0]);
        }
        if (u.tree != 0) {
          mask_tree_keys(u, scores, j0, j1 - j0 + 1);
          mt = -INFINITY;
          for (int32_t j = j0; j <= j1; ++j) mt = std::max(mt, scores[j - j0]);
        }
        const float m_new = std::max(m, mt);
        const float alpha = m == -INFINITY ? 0.0f : std::exp(m - m_new);
        double sum = 0.0;
        for (int32_t j = j0; j <= j1; ++j) {
          scores[j - j0] = std::exp(scores[j - j0] - m_new);
          sum += scores[j - j0];
        }
        l = l * alpha + static_cast<float>(sum);
        m = m_new;
        for (int32_t i = 0; i < hd; ++i) acc[i] *= alpha;
        for (int32_t j = j0; j <= j1; ++j) {
          const uint8_t* vr = row(u, u.v, j);
          for (int32_t i = 0; i < hd; ++i) acc[i] += scores[j - j0] * kv_at(u, vr, i);
        }
      }
      const int32_t r = t * u.n_heads + h;
      if (u.partial != nullptr) {
        u.partial[r].m = m;
        u.partial[r].l = l;
        std::copy(acc, acc + hd, u.partial[r].acc);
        continue;
      }
      float* o = u.out + t * u.q_stride + static_cast<int64_t>(h) * hd;
      const float inv = l > 0.0f ? 1.0f / l : 0.0f;
      for (int32_t i = 0; i < hd; ++i) o[i] = acc[i] * inv;
    }
  }
}

// The reference body: one token and head at a time, every sum in order.
void attend_scalar(const Unit& u) {
  if (u.tiled) {
    attend_scalar_tiled(u);
    return;
  }
  const int32_t hd = u.head_dim;
  float* scores = u.scratch;
  float* qh = u.scratch + u.ld;
  for (int32_t t = 0; t < u.n_tokens; ++t) {
    const int32_t pos = u.hi + t;
    const int32_t lo = u.window > 0 && u.tree == 0 ? std::max(u.lo, pos - u.window + 1) : u.lo;
    const int32_t last = u.key_last >= 0 ? u.key_last : pos;
    const int32_t len = last - lo + 1;
    for (int32_t h = 0; h < u.n_heads; ++h) {
      const float* qs = u.q + t * u.q_stride + static_cast<int64_t>(h) * hd;
      // Q is rounded to FP16 like the cached K it meets, as llama.cpp does.
      for (int32_t i = 0; i < hd; ++i) qh[i] = fp16_to_fp32(fp32_to_fp16(qs[i]));
      float m = -INFINITY;
      for (int32_t j = lo; j <= last; ++j) {
        const uint8_t* kr = row(u, u.k, j);
        float s = 0.0f;
        for (int32_t i = 0; i < hd; ++i) s += qh[i] * kv_at(u, kr, i);
        s *= u.scale;
        if (u.softcap != 0.0f) s = softcap(s, u.softcap);
        scores[j - lo] = s;
        m = std::max(m, s);
      }
      if (u.tree != 0) {
        mask_tree_keys(u, scores, lo, len);
        m = -INFINITY;
        for (int32_t j = 0; j < len; ++j) m = std::max(m, scores[j]);
      }
      double sum = 0.0;
      for (int32_t j = 0; j < len; ++j) {
        scores[j] = std::exp(scores[j] - m);
        sum += scores[j];
      }
      // Probabilities are rounded to FP16 before weighting the FP16 values, matching
      // llama.cpp's V x softmax product so greedy outputs agree token for token.
      const float inv = static_cast<float>(1.0 / sum);
      float* o = u.out + t * u.q_stride + static_cast<int64_t>(h) * hd;
      std::fill(o, o + hd, 0.0f);
      for (int32_t j = 0; j < len; ++j) {
        const float w = fp16_to_fp32(fp32_to_fp16(scores[j] * inv));
        const uint8_t* vr = row(u, u.v, lo + j);
        for (int32_t i = 0; i < hd; ++i) o[i] += w * kv_at(u, vr, i);
      }
    }
  }
}

}  // namespace attn

attn::Body attn::body_for(SimdTarget t, int32_t head_dim) {
  if (t >= SimdTarget::kAvx512 && head_dim % 16 == 0) return attn::attend_avx512;
  if (t >= SimdTarget::kAvx2 && head_dim % 8 == 0) return attn::attend_avx2;
  return attn::attend_scalar;
}

namespace {

attn::Body pick_body(int32_t head_dim) {
  static const SimdTarget best = best_simd_target();
  return attn::body_for(best, head_dim);
}

// Units of tokens 0..n-1 in the order pairs (0, n-1), (1, n-2), ...: under the causal mask
// a token's cost grows with its position, so every contiguous run of units (what
// parallel_for hands a thread) gets about the same amount of work.
inline int64_t zigzag(int64_t i, int64_t n) { return (i & 1) == 0 ? i / 2 : n - 1 - i / 2; }

}  // namespace

void attention_causal(const float* q, int64_t n_tokens, int32_t pos0, const uint16_t* k, const uint16_t* v,
                      const AttentionParams& p, float* out, ThreadPool& pool) {
  attn::run(pick_body(p.head_dim), q, n_tokens, pos0, k, v, p, out, pool);
}

void attention_paged(const float* q, std::span<const AttnSeq> seqs, const PagedKv& kv, const AttentionParams& p,
                     float* out, ThreadPool& pool) {
  attn::run_paged(pick_body(p.head_dim), q, seqs, kv, p, out, pool);
}

void attn::run(Body body, const float* q, int64_t n_tokens, int32_t pos0, const uint16_t* k, const uint16_t* v,
               const AttentionParams& p, float* out, ThreadPool& pool) {
  // A contiguous cache is one block as long as any context.
  static const int32_t kOneBlock = 0;
  PagedKv kv;
  kv.k = k;
  kv.v = v;
  kv.block_stride = 0;
  kv.row_stride = kv_row_bytes(KvType::kF16, p.n_kv_heads, p.head_dim);
  kv.block_shift = 30;
  AttnSeq s;
  s.n_tokens = static_cast<int32_t>(n_tokens);
  s.pos0 = pos0;
  s.block_table = &kOneBlock;
  run_paged(body, q, std::span<const AttnSeq>(&s, 1), kv, p, out, pool);
}

namespace attn {
namespace {

// Units are (sequence, KV head, block of consecutive tokens, slice of the group's query
// heads). A unit's query rows share every K/V row it loads: a SIMD body puts the rows of
// a block (about 16: tokens x heads of the group) in vector lanes. Decode has one token
// per sequence; there the group is sliced only as far as needed for the threads to get
// equal shares (few sequences and KV heads): the fewest slices that make the unit count
// a multiple of the thread count, or at least 4 units a thread.
struct SeqPlan {
  int32_t block;
  int64_t n_blocks;
  int32_t parts;       // split-KV parts of a decode over a long context
  int32_t part_keys;   // keys per part
  bool tiled;
  int64_t first_unit;
  int64_t first_partial;  // index of its first partial row state (split only)
};

struct PagedPlan {
  std::vector<SeqPlan>* seqs;  // plan_paged's thread_local vector, one per sequence
  int32_t group, slices, per_slice;
  int64_t units = 0, partial_rows = 0;
  size_t scratch = 0;  // floats of per-thread scratch
};

PagedPlan plan_paged(attn::Body body, std::span<const AttnSeq> seqs, const AttentionParams& p, int64_t threads) {
  thread_local std::vector<SeqPlan> plan;
  plan.resize(seqs.size());
  PagedPlan pp{&plan, p.n_heads / p.n_kv_heads, 1, 1};
  int64_t base_units = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const int32_t n = seqs[i].n_tokens;
    plan[i].block = body == attn::attend_scalar || n == 1 ? 1 : std::max(1, 32 / pp.group);
    plan[i].n_blocks = (n + plan[i].block - 1) / plan[i].block;
    base_units += plan[i].n_blocks * p.n_kv_heads;
  }
  int32_t slices = 1;
  while (slices < pp.group && (base_units * slices) % threads != 0 && base_units * slices < 4 * threads) ++slices;
  pp.per_slice = (pp.group + slices - 1) / slices;
  pp.slices = slices = (pp.group + pp.per_slice - 1) / pp.per_slice;
  for (size_t i = 0; i < seqs.size(); ++i) {
    SeqPlan& sp = plan[i];
    const int32_t total = seqs[i].pos0 + seqs[i].n_tokens;
    const int32_t block = sp.block;
    // A tree node's window runs from its depth, up to 63 slots before its own.
    const int32_t behind = seqs[i].tree != 0 ? seqs[i].pos0 - seqs[i].tree_pos : 0;
    const int32_t max_len =
        p.window > 0 && !seqs[i].bidirectional ? std::min<int32_t>(p.window + block - 1 + behind, total) : total;
    sp.tiled = max_len > kTiledMinKeys;
    sp.parts = 1;
    sp.part_keys = max_len;
    // A lone long decode has too few units for the threads: cut its keys into parts.
    if (sp.tiled && seqs[i].n_tokens == 1 && base_units * slices < 2 * threads) {
      const int64_t want = (2 * threads + base_units * slices - 1) / (base_units * slices);
      sp.parts = static_cast<int32_t>(std::clamp<int64_t>(want, 1, max_len / kSplitMinKeys));
      if (sp.parts < 1) sp.parts = 1;
      sp.part_keys = (max_len + sp.parts - 1) / sp.parts;
    }
    sp.first_unit = pp.units;
    sp.first_partial = pp.partial_rows;
    pp.units += sp.n_blocks * p.n_kv_heads * slices * sp.parts;
    if (sp.parts > 1) pp.partial_rows += static_cast<int64_t>(p.n_kv_heads) * slices * pp.per_slice * sp.parts;
    pp.scratch = std::max(pp.scratch, sp.tiled ? tiled_scratch_floats(block * pp.per_slice, p.head_dim)
                                               : scratch_floats(block * pp.per_slice, p.head_dim, max_len));
  }
  return pp;
}

// Merges the parts of each split decode: out = sum_p acc_p e^(m_p - M) / sum_p l_p e^(m_p - M).
void merge_partials(std::span<const AttnSeq> seqs, const PagedPlan& pp, const PartialRow* part_base,
                    const AttentionParams& p, float* out) {
  const int32_t hd = p.head_dim;
  const int64_t q_stride = static_cast<int64_t>(p.n_heads) * hd;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const SeqPlan& sp = (*pp.seqs)[i];
    if (sp.parts <= 1) continue;
    float* o_tok = out + seqs[i].q_offset * q_stride;
    for (int32_t kvh = 0; kvh < p.n_kv_heads; ++kvh)
      for (int32_t slice = 0; slice < pp.slices; ++slice) {
        const int32_t h0 = slice * pp.per_slice;
        const int32_t nh = std::min(pp.per_slice, pp.group - h0);
        const PartialRow* pr = part_base + sp.first_partial +
                               (static_cast<int64_t>(kvh) * pp.slices + slice) * sp.parts * pp.per_slice;
        for (int32_t h = 0; h < nh; ++h) {
          float M = -INFINITY;
          for (int32_t pt = 0; pt < sp.parts; ++pt) M = std::max(M, pr[pt * pp.per_slice + h].m);
          float* o = o_tok + (static_cast<int64_t>(kvh) * pp.group + h0 + h) * hd;
          std::fill(o, o + hd, 0.0f);
          float L = 0.0f;
          for (int32_t pt = 0; pt < sp.parts; ++pt) {
            const PartialRow& r = pr[pt * pp.per_slice + h];
            if (r.l == 0.0f) continue;
            const float w = std::exp(r.m - M);
            L += r.l * w;
            for (int32_t c = 0; c < hd; ++c) o[c] += r.acc[c] * w;
          }
          const float inv = L > 0.0f ? 1.0f / L : 0.0f;
          for (int32_t c = 0; c < hd; ++c) o[c] *= inv;
        }
      }
  }
}

}  // namespace
}  // namespace attn

void attn::run_paged(Body body, const float* q, std::span<const AttnSeq> seqs, const PagedKv& kv,
                     const AttentionParams& p, float* out, ThreadPool& pool) {
  assert(p.n_kv_heads > 0 && p.n_heads % p.n_kv_heads == 0 && p.head_dim > 0);
  if (seqs.empty()) return;
  const int32_t hd = p.head_dim;
  const int64_t q_stride = static_cast<int64_t>(p.n_heads) * hd;
  const PagedPlan pp = plan_paged(body, seqs, p, pool.num_threads());
  const int32_t group = pp.group, slices = pp.slices, per_slice = pp.per_slice;
  const int64_t partial_rows = pp.partial_rows;
  const size_t scratch = pp.scratch;
  // Partial row states of split decodes: (m, l) pairs and head_dim accumulators.
  thread_local std::vector<PartialRow> partials;
  thread_local std::vector<float> partial_acc;
  partials.resize(static_cast<size_t>(partial_rows));
  partial_acc.resize(static_cast<size_t>(partial_rows) * hd);
  for (int64_t r = 0; r < partial_rows; ++r) partials[r].acc = partial_acc.data() + r * hd;
  const SeqPlan* plans = pp.seqs->data();
  const int64_t head_bytes = kv_row_bytes(kv.type, 1, hd);
  PartialRow* part_base = partials.data();
  const int32_t mask = static_cast<int32_t>((int64_t{1} << kv.block_shift) - 1);
  pool.parallel_for(pp.units, 1, [&](int64_t b, int64_t e, int) {
    // Per-thread scratch (score rows and rounded queries), grown on demand, never shrunk.
    thread_local std::vector<float> buf;
    if (buf.size() < scratch) buf.resize(scratch);
    size_t si = 0;
    for (int64_t job = b; job < e; ++job) {
      while (si + 1 < seqs.size() && plans[si + 1].first_unit <= job) ++si;
      const AttnSeq& s = seqs[si];
      const SeqPlan& sp = plans[si];
      int64_t local = job - sp.first_unit;
      const int32_t part = static_cast<int32_t>(local % sp.parts);
      local /= sp.parts;
      const int32_t kvh = static_cast<int32_t>(local / (sp.n_blocks * slices));
      const int64_t rest = local % (sp.n_blocks * slices);
      const int64_t t0 = zigzag(rest / slices, sp.n_blocks) * sp.block;
      const int32_t slice = static_cast<int32_t>(rest % slices);
      const int32_t h0 = slice * per_slice;
      const int32_t pos = s.pos0 + static_cast<int32_t>(t0);
      Unit u;
      const int64_t head = static_cast<int64_t>(kvh) * group + h0;
      u.q = q + (s.q_offset + t0) * q_stride + head * hd;
      u.out = out + (s.q_offset + t0) * q_stride + head * hd;
      u.q_stride = q_stride;
      u.n_tokens = static_cast<int32_t>(std::min<int64_t>(sp.block, s.n_tokens - t0));
      u.n_heads = std::min(per_slice, group - h0);
      u.head_dim = hd;
      u.k = static_cast<const uint8_t*>(kv.k) + static_cast<int64_t>(kvh) * head_bytes;
      u.v = static_cast<const uint8_t*>(kv.v) + static_cast<int64_t>(kvh) * head_bytes;
      u.i8 = kv.type == KvType::kI8;
      u.table = s.block_table;
      u.shift = kv.block_shift;
      u.mask = mask;
      u.block_stride = kv.block_stride;
      u.kv_stride = kv.row_stride;
      u.window = s.bidirectional ? 0 : p.window;
      u.tree = s.tree;
      u.tree_base = s.tree_base;
      u.lo = u.window > 0 ? std::max(0, (s.tree != 0 ? s.tree_pos : pos) - u.window + 1) : 0;
      u.hi = pos;
      u.key_last = s.bidirectional ? s.pos0 + s.n_tokens - 1 : -1;
      // The last key any token of the unit sees.
      const int32_t unit_last = s.bidirectional ? u.key_last : u.hi + u.n_tokens - 1;
      u.scale = p.scale;
      u.softcap = p.softcap;
      u.rows_in_lanes = s.n_tokens > 1 || group >= 16;
      u.scratch = buf.data();
      u.tiled = sp.tiled;
      if (sp.tiled) {
        u.ld = score_stride(kTileKeys);
        u.klo = u.lo + part * sp.part_keys;
        u.khi = sp.parts > 1 ? std::min(unit_last, u.klo + sp.part_keys - 1) : unit_last;
        if (sp.parts > 1)
          u.partial = part_base + sp.first_partial +
                      ((static_cast<int64_t>(kvh) * slices + slice) * sp.parts + part) * per_slice;
      } else {
        u.ld = score_stride(unit_last + 1 - u.lo);
      }
      if (u.klo > u.khi && u.partial != nullptr) {
        for (int32_t r = 0; r < u.n_heads; ++r) u.partial[r].m = -INFINITY, u.partial[r].l = 0.0f;
        continue;
      }
      body(u);
    }
  });
  if (partial_rows > 0) merge_partials(seqs, pp, part_base, p, out);
}

}  // namespace pagoda

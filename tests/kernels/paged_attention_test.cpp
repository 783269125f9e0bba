// Paged attention (FP16 and int8 caches) against a naive double-precision reference of the
// values the cache holds, through block tables that
// scatter a sequence's positions over a pool, at context lengths up to 32k tokens: short
// contexts take the exact whole-row path, long ones the tiled online-softmax path (and
// a lone long decode the split-KV path). Several sequences share one call, as in an
// engine step; every runnable body is checked. The tiled path keeps no probabilities in
// FP16, so the reference here is plain softmax; the tolerance covers FP16 rounding of q
// and the float sums.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "base/fp16.h"
#include "kernels/attention/attention.h"
#include "kernels/attention/attention_kernels.h"
#include "kernels/simd/simd_target.h"

namespace pagoda {
namespace {

struct PagedCase {
  std::vector<int32_t> contexts;  // per sequence: keys it sees (pos0 + n_tokens)
  std::vector<int32_t> n_tokens;  // per sequence: query tokens at its end
  int32_t heads = 8, kv_heads = 2, head_dim = 64, block = 16, window = 0;
  KvType type = KvType::kF16;
  bool bidirectional = false;  // every token sees its sequence's every key (an encoder)
};

struct Pool {
  std::vector<uint8_t> k, v;   // [blocks][block][row bytes]
  std::vector<float> kf, vf;   // the same values as floats, [blocks][block][kv_heads * hd]
  std::vector<std::vector<int32_t>> tables;
};

// Fills one stored row from random values and records what it holds (FP16, or int8
// per head with a float scale) in `f`.
void fill_row(KvType t, int32_t kv_heads, int32_t hd, std::mt19937& rng, uint8_t* dst, float* f) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (int32_t h = 0; h < kv_heads; ++h) {
    std::vector<float> x(hd);
    for (float& e : x) e = nd(rng);
    if (t == KvType::kF16) {
      for (int32_t i = 0; i < hd; ++i) {
        const uint16_t b = fp32_to_fp16(x[i]);
        std::memcpy(dst + 2 * (h * hd + i), &b, 2);
        f[h * hd + i] = fp16_to_fp32(b);
      }
      continue;
    }
    uint8_t* hr = dst + h * (4 + hd);
    float amax = 0;
    for (float e : x) amax = std::max(amax, std::fabs(e));
    const float d = amax / 127.0f;
    std::memcpy(hr, &d, 4);
    for (int32_t i = 0; i < hd; ++i) {
      const int8_t q = static_cast<int8_t>(std::nearbyint(x[i] / d));
      hr[4 + i] = static_cast<uint8_t>(q);
      f[h * hd + i] = d * q;
    }
  }
}

void run_case(const PagedCase& c, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int32_t row = c.kv_heads * c.head_dim;
  int32_t total_blocks = 0;
  for (int32_t ctx : c.contexts) total_blocks += (ctx + c.block - 1) / c.block;
  // Blocks handed out in a shuffled order, so no sequence's blocks are contiguous.
  std::vector<int32_t> ids(static_cast<size_t>(total_blocks));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  Pool pool;
  const int64_t row_bytes = kv_row_bytes(c.type, c.kv_heads, c.head_dim);
  const size_t rows_total = static_cast<size_t>(total_blocks) * c.block;
  pool.k.resize(rows_total * row_bytes);
  pool.v.resize(pool.k.size());
  pool.kf.resize(rows_total * row);
  pool.vf.resize(pool.kf.size());
  for (size_t r = 0; r < rows_total; ++r) {
    fill_row(c.type, c.kv_heads, c.head_dim, rng, &pool.k[r * row_bytes], &pool.kf[r * row]);
    fill_row(c.type, c.kv_heads, c.head_dim, rng, &pool.v[r * row_bytes], &pool.vf[r * row]);
  }
  size_t next = 0;
  std::vector<AttnSeq> seqs;
  int64_t q_tokens = 0;
  for (size_t s = 0; s < c.contexts.size(); ++s) {
    const int32_t nb = (c.contexts[s] + c.block - 1) / c.block;
    pool.tables.emplace_back(ids.begin() + static_cast<std::ptrdiff_t>(next),
                             ids.begin() + static_cast<std::ptrdiff_t>(next + nb));
    next += static_cast<size_t>(nb);
  }
  for (size_t s = 0; s < c.contexts.size(); ++s) {
    AttnSeq a;
    a.q_offset = q_tokens;
    a.n_tokens = c.n_tokens[s];
    a.pos0 = c.contexts[s] - c.n_tokens[s];
    a.block_table = pool.tables[s].data();
    a.bidirectional = c.bidirectional;
    seqs.push_back(a);
    q_tokens += c.n_tokens[s];
  }
  const int64_t q_stride = static_cast<int64_t>(c.heads) * c.head_dim;
  std::vector<float> q(static_cast<size_t>(q_tokens * q_stride));
  for (auto& x : q) x = nd(rng) * 0.5f;
  int32_t shift = 0;
  while ((1 << shift) < c.block) ++shift;
  PagedKv kv;
  kv.k = pool.k.data();
  kv.v = pool.v.data();
  kv.block_stride = static_cast<int64_t>(c.block) * row_bytes;
  kv.row_stride = row_bytes;
  kv.block_shift = shift;
  kv.type = c.type;
  AttentionParams p;
  p.n_heads = c.heads;
  p.n_kv_heads = c.kv_heads;
  p.head_dim = c.head_dim;
  p.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  p.window = c.window;

  // Reference: double precision, q rounded to FP16 like the kernel's.
  std::vector<double> ref(q.size());
  const int32_t group = c.heads / c.kv_heads;
  auto at = [&](const std::vector<float>& m, size_t s, int32_t j, int32_t kvh, int32_t i) {
    const int32_t b = pool.tables[s][j / c.block];
    return static_cast<double>(m[(static_cast<size_t>(b) * c.block + j % c.block) * row + kvh * c.head_dim + i]);
  };
  std::vector<double> sc, qh(c.head_dim);
  for (size_t s = 0; s < seqs.size(); ++s)
    for (int32_t t = 0; t < seqs[s].n_tokens; ++t) {
      const int32_t own = seqs[s].pos0 + t;
      const int32_t pos = c.bidirectional ? c.contexts[s] - 1 : own;  // the last key it sees
      const int32_t lo = c.window > 0 && !c.bidirectional ? std::max(0, own - c.window + 1) : 0;
      for (int32_t h = 0; h < c.heads; ++h) {
        const float* qs = &q[(seqs[s].q_offset + t) * q_stride + h * c.head_dim];
        for (int32_t i = 0; i < c.head_dim; ++i) qh[i] = fp16_to_fp32(fp32_to_fp16(qs[i]));
        sc.assign(static_cast<size_t>(pos - lo + 1), 0.0);
        double mx = -1e300;
        for (int32_t j = lo; j <= pos; ++j) {
          double d = 0;
          for (int32_t i = 0; i < c.head_dim; ++i) d += qh[i] * at(pool.kf, s, j, h / group, i);
          sc[j - lo] = d * p.scale;
          mx = std::max(mx, sc[j - lo]);
        }
        double sum = 0;
        for (double& x : sc) sum += (x = std::exp(x - mx));
        double* o = &ref[(seqs[s].q_offset + t) * q_stride + h * c.head_dim];
        for (int32_t j = lo; j <= pos; ++j)
          for (int32_t i = 0; i < c.head_dim; ++i) o[i] += sc[j - lo] / sum * at(pool.vf, s, j, h / group, i);
      }
    }
  for (SimdTarget target : runnable_simd_targets()) {
    SCOPED_TRACE(simd_target_name(target));
    std::vector<float> out(q.size(), -7.0f);
    for (int threads : {1, 3}) {
      ThreadPool tp(threads);
      attn::run_paged(attn::body_for(target, c.head_dim), q.data(), seqs, kv, p, out.data(), tp);
      double worst = 0;
      for (size_t i = 0; i < out.size(); ++i) worst = std::max(worst, std::fabs(out[i] - ref[i]));
      // Outputs are weighted means of N(0,1) values: |out| <~ 1. FP16 probabilities (the
      // whole-row path) cost up to ~1e-3 relative per weight; float sums far less.
      EXPECT_LT(worst, 2e-3) << "threads " << threads;
    }
  }
}

// An encoder's sequences, whole in the call: each token sees the keys after it too, on the
// whole-row path (short) and the tiled one (past 2048 keys); a window does not apply.
TEST(PagedAttention, BidirectionalSequencesSeeEveryKey) {
  PagedCase c;
  c.contexts = {37, 5, 130, 1};
  c.n_tokens = {37, 5, 130, 1};
  c.heads = c.kv_heads = 12;
  c.head_dim = 32;
  c.bidirectional = true;
  run_case(c, 11);
  c.window = 8;
  run_case(c, 12);
  PagedCase big;  // narrow heads: the reference's cost grows with the square of the keys
  big.contexts = {2090};
  big.n_tokens = {2090};
  big.heads = 2;
  big.kv_heads = 1;
  big.head_dim = 16;
  big.bidirectional = true;
  run_case(big, 13);
}

TEST(PagedAttention, ShortContextsOfSeveralSequencesMatchTheReference) {
  run_case({{37, 100, 5, 64}, {1, 7, 5, 1}}, 1);
}

TEST(PagedAttention, PrefillChunkAtTheEndOfALongContextUsesTilesAndMatches) {
  run_case({{6000, 40}, {9, 3}}, 2);
}

TEST(PagedAttention, LoneDecodeAt32kTokensSplitsTheKeysAndMatches) {
  run_case({{32768}, {1}}, 3);
}

TEST(PagedAttention, DecodesOfManyLongSequencesMatch) {
  run_case({{4100, 2500, 3000, 9000}, {1, 1, 1, 1}}, 4);
}

TEST(PagedAttention, SlidingWindowOverALongContextMatches) {
  PagedCase c{{5000, 300}, {4, 1}};
  c.window = 512;
  run_case(c, 5);
}

TEST(PagedAttention, MultiQueryAndLargeGroupsMatch) {
  PagedCase c{{3000, 20}, {1, 6}};
  c.heads = 16;
  c.kv_heads = 1;
  run_case(c, 6);
}

TEST(PagedAttention, Int8CacheMatchesTheReferenceOnEveryPath) {
  for (const PagedCase& base : {PagedCase{{37, 100, 5}, {1, 7, 5}}, PagedCase{{5000}, {3}}, PagedCase{{20000}, {1}}}) {
    PagedCase c = base;
    c.type = KvType::kI8;
    run_case(c, 7);
  }
}

TEST(PagedAttention, ScratchOfTheTiledPathDoesNotGrowWithTheContext) {
  // Whole-row units need a score row per query row as long as the context; tiled units a
  // fixed tile, which is what keeps long-context memory linear (the KV cache itself).
  EXPECT_GT(attn::scratch_floats(32, 64, 32768), attn::scratch_floats(32, 64, 4096));
  EXPECT_LT(attn::tiled_scratch_floats(32, 64), attn::scratch_floats(32, 64, attn::kTiledMinKeys));
}

}  // namespace
}  // namespace pagoda

namespace pagoda {
namespace {

// A draft tree's nodes (AttnSeq::tree): each node, verified with its siblings in one call,
// must attend exactly as it would had its branch been decoded alone: against a cache
// where the prefix is followed by just its ancestors, at the position of its depth. The
// scalar body sums in key order, so the masked keys' zeros leave its result bit for bit;
// the SIMD bodies' double sum of the softmax moves keys between lanes, within 1e-6.
// Short contexts (whole rows), past 2048 keys (tiles), a lone decode long enough to split
// its keys, and a sliding window that starts before the tree.
TEST(PagedAttention, DraftTreeNodesSeeOnlyTheirAncestors) {
  struct Shape {
    int32_t prefix, window;
  };
  // Root (the last verified token) 0; 1, 2 its children; 3 under 1; 4, 5 under 2; 6 under 5.
  const std::vector<int32_t> parent = {-1, 0, 0, 1, 2, 2, 5};
  const int32_t n = static_cast<int32_t>(parent.size());
  std::vector<int32_t> depth(n, 0);
  std::vector<uint64_t> mask(n, 0);
  for (int32_t r = 0; r < n; ++r) {
    depth[r] = parent[r] >= 0 ? depth[parent[r]] + 1 : 0;
    mask[r] = (parent[r] >= 0 ? mask[parent[r]] : 0) | (uint64_t{1} << r);
  }
  const int32_t heads = 4, kv_heads = 2, hd = 64, block = 16;
  const int64_t row_bytes = kv_row_bytes(KvType::kF16, kv_heads, hd);
  for (const Shape sh : {Shape{37, 0}, Shape{2500, 0}, Shape{9000, 0}, Shape{300, 64}}) {
    SCOPED_TRACE(sh.prefix);
    std::mt19937 rng(static_cast<uint32_t>(sh.prefix));
    const int32_t total = sh.prefix + n;
    const int32_t blocks = (total + block - 1) / block;
    std::vector<uint8_t> k(static_cast<size_t>(blocks) * block * row_bytes), v(k.size());
    std::vector<float> scratch(static_cast<size_t>(kv_heads * hd));
    for (int32_t r = 0; r < blocks * block; ++r) {
      fill_row(KvType::kF16, kv_heads, hd, rng, &k[r * row_bytes], scratch.data());
      fill_row(KvType::kF16, kv_heads, hd, rng, &v[r * row_bytes], scratch.data());
    }
    std::vector<int32_t> table(static_cast<size_t>(blocks));
    std::iota(table.begin(), table.end(), 0);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> q(static_cast<size_t>(n) * heads * hd);
    for (float& x : q) x = nd(rng);
    AttentionParams p;
    p.n_heads = heads;
    p.n_kv_heads = kv_heads;
    p.head_dim = hd;
    p.scale = 0.125f;
    p.window = sh.window;
    auto kv_of = [&](const std::vector<uint8_t>& kk, const std::vector<uint8_t>& vv) {
      PagedKv kv;
      kv.k = kk.data();
      kv.v = vv.data();
      kv.block_stride = block * row_bytes;
      kv.row_stride = row_bytes;
      kv.block_shift = 4;
      return kv;
    };
    for (SimdTarget target : runnable_simd_targets()) {
      SCOPED_TRACE(simd_target_name(target));
      const attn::Body body = attn::body_for(target, hd);
      ThreadPool tp(2);
      // Every node in one call, as a step verifies them.
      std::vector<AttnSeq> seqs;
      for (int32_t r = 0; r < n; ++r) {
        AttnSeq a;
        a.q_offset = r;
        a.n_tokens = 1;
        a.pos0 = sh.prefix + r;
        a.block_table = table.data();
        a.tree = mask[r];
        a.tree_base = sh.prefix;
        a.tree_pos = sh.prefix + depth[r];
        seqs.push_back(a);
      }
      std::vector<float> out(q.size());
      attn::run_paged(body, q.data(), seqs, kv_of(k, v), p, out.data(), tp);
      for (int32_t r = 0; r < n; ++r) {
        SCOPED_TRACE(r);
        // The branch alone: the prefix, then the node's ancestors from the root down.
        std::vector<uint8_t> kb(k.begin(), k.begin() + static_cast<std::ptrdiff_t>(sh.prefix * row_bytes));
        std::vector<uint8_t> vb(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(sh.prefix * row_bytes));
        std::vector<int32_t> path;
        for (int32_t a = r; a >= 0; a = parent[a]) path.insert(path.begin(), a);
        for (int32_t a : path) {
          const auto at = static_cast<std::ptrdiff_t>((sh.prefix + a) * row_bytes);
          kb.insert(kb.end(), k.begin() + at, k.begin() + at + row_bytes);
          vb.insert(vb.end(), v.begin() + at, v.begin() + at + row_bytes);
        }
        kb.resize(static_cast<size_t>(blocks) * block * row_bytes);
        vb.resize(kb.size());
        // As many copies of the branch alone as the tree has nodes, so the call splits its
        // work the same way (a lone long decode would split its keys into parts).
        const size_t qn = static_cast<size_t>(heads) * hd;
        std::vector<float> qq(static_cast<size_t>(n) * qn);
        std::vector<AttnSeq> alone(static_cast<size_t>(n));
        for (int32_t c = 0; c < n; ++c) {
          std::copy_n(&q[static_cast<size_t>(r) * qn], qn, &qq[static_cast<size_t>(c) * qn]);
          alone[c].q_offset = c;
          alone[c].n_tokens = 1;
          alone[c].pos0 = sh.prefix + depth[r];
          alone[c].block_table = table.data();
        }
        std::vector<float> want(qq.size());
        attn::run_paged(body, qq.data(), alone, kv_of(kb, vb), p, want.data(), tp);
        for (size_t i = 0; i < qn; ++i) {
          const float got = out[static_cast<size_t>(r) * qn + i];
          if (target == SimdTarget::kScalar) ASSERT_EQ(got, want[i]) << "i " << i;
          else ASSERT_NEAR(got, want[i], 1e-6) << "i " << i;
        }
        // The node in a call of its own: past 1,024 keys its keys are split into parts
        // (at other boundaries than the branch's alone, so within rounding).
        std::vector<float> own(qn), own_want(qn);
        AttnSeq node = seqs[static_cast<size_t>(r)];
        node.q_offset = 0;
        attn::run_paged(body, &q[static_cast<size_t>(r) * qn], std::span<const AttnSeq>(&node, 1), kv_of(k, v), p,
                        own.data(), tp);
        AttnSeq lone = alone[0];
        lone.q_offset = 0;
        attn::run_paged(body, &q[static_cast<size_t>(r) * qn], std::span<const AttnSeq>(&lone, 1), kv_of(kb, vb), p,
                        own_want.data(), tp);
        for (size_t i = 0; i < qn; ++i) ASSERT_NEAR(own[i], own_want[i], 1e-6) << "alone, i " << i;
      }
    }
  }
}

}  // namespace
}  // namespace pagoda

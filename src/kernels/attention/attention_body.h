// Internal: the SIMD attention body, written once over the vector layer (V256 in
// vec_avx2.h, V512 in vec_avx512.h) and included by attention_avx2.cpp and
// attention_avx512.cpp after their V header (so it is compiled once per target).
// Everything lands in an anonymous namespace: internal linkage, no copy shared with code
// compiled for another target.
//
// A unit (attention_kernels.h) in three steps:
//  1. Scores, one of two ways (the front picks by the call's shape, Unit::rows_in_lanes):
//     - one token whose group has few heads (decode): blocks of H heads x K
//       keys (H * K = kLanes accumulators over head_dim, each key vector loaded once for
//       all H heads); one transposing reduce turns them into kLanes scores.
//     - otherwise (prefill): the unit's query rows (tokens x heads) go in lanes, transposed
//       once; for each block of kLanes keys (converted to float once), score vectors for
//       kLanes rows build up over head_dim with one broadcast multiply-add per key and
//       dimension, then one register transpose turns them into rows. No reductions; every
//       key row is read once for all the unit's tokens. Rows compute scores for every key
//       of the unit's range and each token's softmax reads only its own keys.
//  2. Softmax per query row: with a soft cap, the row's scores capped first (vtanh.h:
//     the scalar softcap's bits, in vectors); vector max, exp and the double sum (vexp.h:
//     libm's expf bit for bit, in vectors), probabilities scaled and rounded to FP16 in
//     vectors.
//  3. Values, per token: for H heads x CW vectors of head_dim, each value row chunk is
//     loaded once for all H heads and weighted by broadcast probabilities; no reduction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/simd/vexp.h"
#include "kernels/simd/vtanh.h"
#include "kernels/attention/attention_kernels.h"

namespace pagoda::attn {
namespace {

template <class V, bool kI8>
struct Attend {
  using F = typename V::F;
  static constexpr int L = V::kLanes;

  // Values c .. c + L - 1 of a cached head row (FP16, or int8 times the row's scale).
  static F load_row(const uint8_t* r, int c) {
    if constexpr (kI8) {
      float d;
      std::memcpy(&d, r, sizeof(d));
      return V::mul(V::load_i8(reinterpret_cast<const int8_t*>(r + sizeof(float)) + c), V::set1(d));
    } else {
      return V::load_h(reinterpret_cast<const uint16_t*>(r) + c);
    }
  }

  // Key or value row j of the unit's KV head (base = u.k or u.v).
  static const uint8_t* row(const Unit& u, const uint8_t* base, int32_t j) {
    return base + u.table[j >> u.shift] * u.block_stride + static_cast<int64_t>(j & u.mask) * u.kv_stride;
  }

  // Keys and values stream from memory on every step, 16-row runs from scattered blocks:
  // the hardware prefetcher loses the stream at each block jump, so the rows kAhead
  // positions on are requested while the current ones are computed (within one call: the
  // first kAhead rows of a call or a tile go unprefetched).
  static constexpr int32_t kAhead = 16;
  static void prefetch_row(const Unit& u, const uint8_t* base, int32_t j) {
    const uint8_t* r = row(u, base, j);
    const int bytes = kI8 ? 4 + u.head_dim : 2 * u.head_dim;
    for (int off = 0; off < bytes; off += 64) __builtin_prefetch(r + off);
  }

  // ------------------------------------------------------------------ one token (decode)

  // Scores of H heads (rows q + h * hd) against keys klo..khi, times scale, into the score
  // rows sc + h * ld (column 0 = key klo), K keys at a time. Keys past khi repeat key khi;
  // their scores land in the row padding.
  template <int H, int K>
  static void qk_row(const Unit& u, const float* q, float* sc, int32_t klo, int32_t khi) {
    static_assert(H * K == L);
    const int hd = u.head_dim;
    const F scale = V::set1(u.scale);
    for (int32_t j = klo; j <= khi; j += K) {
      const uint8_t* kr[K];
      for (int kk = 0; kk < K; ++kk) kr[kk] = row(u, u.k, j + kk <= khi ? j + kk : khi);
      for (int kk = 0; kk < K && j + kAhead + kk <= khi; ++kk) prefetch_row(u, u.k, j + kAhead + kk);
      F acc[L];
      for (int a = 0; a < L; ++a) acc[a] = V::zero();
      for (int c = 0; c < hd; c += L) {
        F kv[K];
        for (int kk = 0; kk < K; ++kk) kv[kk] = load_row(kr[kk], c);
        for (int h = 0; h < H; ++h) {
          const F qv = V::load(q + h * hd + c);
          for (int kk = 0; kk < K; ++kk) acc[h * K + kk] = V::fma(qv, kv[kk], acc[h * K + kk]);
        }
      }
      alignas(64) float s[L];
      V::store(s, V::mul(V::reduce(acc), scale));
      for (int h = 0; h < H; ++h) std::memcpy(sc + h * u.ld + (j - klo), s + h * K, K * sizeof(float));
    }
  }

  // Q is rounded to FP16 like the cached K it meets, as llama.cpp does.
  static void prepare_one_token(const Unit& u, float* qh) {
    for (int i = 0; i < u.n_heads * u.head_dim; i += L) V::store(qh + i, V::round_h(V::load(u.q + i)));
  }

  static void scores_one_token(const Unit& u, float* sc, const float* qh, int32_t klo, int32_t khi) {
    const int hd = u.head_dim;
    const int32_t nh = u.n_heads;
    for (int32_t h = 0; h < nh;) {
      const float* q = qh + h * hd;
      float* s = sc + h * u.ld;
      const int32_t left = nh - h;
      if (left >= 8) { qk_row<8, L / 8>(u, q, s, klo, khi); h += 8; }
      else if (left >= 4) { qk_row<4, L / 4>(u, q, s, klo, khi); h += 4; }
      else if (left >= 2) { qk_row<2, L / 2>(u, q, s, klo, khi); h += 2; }
      else { qk_row<1, L>(u, q, s, klo, khi); h += 1; }
    }
  }

  // ------------------------------------------------------------------ rows in lanes (prefill)

  // The unit's query rows (row r = token * n_heads + head), FP16-rounded and transposed
  // for scores_in_lanes: qt[g][i][lane] = row g * L + lane at dimension i (0 past the rows).
  static void prepare_in_lanes(const Unit& u, float* qt) {
    const int hd = u.head_dim;
    const int32_t rows = u.n_tokens * u.n_heads;
    const int32_t groups = (rows + L - 1) / L;
    // qt[g][i][lane] = FP16-rounded q of row g * L + lane at dimension i (0 past the rows).
    alignas(64) float tmp[L];
    for (int32_t g = 0; g < groups; ++g)
      for (int lane = 0; lane < L; ++lane) {
        const int32_t r = g * L + lane;
        float* dst = qt + static_cast<size_t>(g) * hd * L + lane;
        if (r >= rows) {
          for (int i = 0; i < hd; ++i) dst[i * L] = 0.0f;
          continue;
        }
        const float* q = u.q + (r / u.n_heads) * u.q_stride + (r % u.n_heads) * hd;
        for (int c = 0; c < hd; c += L) {
          V::store(tmp, V::round_h(V::load(q + c)));
          for (int m = 0; m < L; ++m) dst[(c + m) * L] = tmp[m];
        }
      }
  }

  // Scores of every query row against keys klo..khi, into sc + r * ld (column 0 = klo).
  static void scores_in_lanes(const Unit& u, float* sc, float* qt, int32_t klo, int32_t khi) {
    const int32_t rows = u.n_tokens * u.n_heads;
    const int32_t groups = (rows + L - 1) / L;
    float* kf = qt + static_cast<size_t>(groups) * u.head_dim * L;
    for (int32_t g = 0; g < groups; g += 2) {
      if (g + 1 < groups) lanes_block<2>(u, qt, kf, g, sc, klo, khi);
      else lanes_block<1>(u, qt, kf, g, sc, klo, khi);
    }
  }

  // Keys per step of lanes_block: NG * KB accumulators, KB broadcasts and NG row loads per
  // dimension (24 / 14 with avx512, 12 / 8 with avx2: multiply-add bound).
  template <int NG>
  static constexpr int kKeys = NG == 2 ? (L == 16 ? 12 : 6) : L;

  // Scores of row groups g .. g + NG - 1 (NG * L rows) against all the unit's keys.
  template <int NG>
  static void lanes_block(const Unit& u, const float* qt, float* kf, int32_t g, float* sc, int32_t klo, int32_t last) {
    constexpr int KB = kKeys<NG>;
    const int hd = u.head_dim;
    const int32_t rows = u.n_tokens * u.n_heads;
    const F scale = V::set1(u.scale);
    const float* q0 = qt + static_cast<size_t>(g) * hd * L;
    for (int32_t j0 = klo; j0 <= last; j0 += KB) {
      // The block's keys as floats, kf[kk][i]; keys past the last repeat it.
      for (int kk = 0; kk < KB; ++kk) {
        const uint8_t* kr = row(u, u.k, j0 + kk <= last ? j0 + kk : last);
        for (int c = 0; c < hd; c += L) V::store(kf + kk * hd + c, load_row(kr, c));
      }
      F acc[NG][KB];
      for (int n = 0; n < NG; ++n)
        for (int kk = 0; kk < KB; ++kk) acc[n][kk] = V::zero();
      for (int i = 0; i < hd; ++i) {
        F qv[NG];
        for (int n = 0; n < NG; ++n) qv[n] = V::load(q0 + (static_cast<size_t>(n) * hd + i) * L);
        for (int kk = 0; kk < KB; ++kk) {
          const F kb = V::set1(kf[kk * hd + i]);
          for (int n = 0; n < NG; ++n) acc[n][kk] = V::fma(qv[n], kb, acc[n][kk]);
        }
      }
      // acc[n][kk] lane r: row (g + n) * L + r against key j0 + kk; transposed, t[r] is the
      // row (KB scores, then zeros that the next block or the row padding absorbs).
      for (int n = 0; n < NG; ++n) {
        F t[L];
        for (int kk = 0; kk < L; ++kk) t[kk] = kk < KB ? acc[n][kk] : V::zero();
        V::transpose(t);
        const int32_t base = (g + n) * L;
        const int32_t cnt = rows - base < L ? rows - base : L;
        for (int32_t r = 0; r < cnt; ++r) V::store(sc + (base + r) * u.ld + (j0 - klo), V::mul(t[r], scale));
      }
    }
  }

  // ------------------------------------------------------------------ softmax and values

  // Soft-capping of one score row (Gemma 2), out of line so that the rows of an uncapped
  // call (every other architecture) pay one comparison and nothing in code size.
  __attribute__((noinline)) static void softcap_row(float* s, int32_t len, float cap) {
    simd::softcap_row<V>(s, len, cap);
  }

  // Softmax of one score row in place, ending as FP16-rounded probabilities.
  static void softmax_row(float* s, int32_t len) {
    int32_t j = 0;
    F mv = V::set1(-INFINITY);
    for (; j + L <= len; j += L) mv = V::max(V::load(s + j), mv);
    float m = V::hmax(mv);
    for (; j < len; ++j) m = s[j] > m ? s[j] : m;
    const double sum = simd::exp_shifted_sum<V>(s, len, m);
    const F inv = V::set1(static_cast<float>(1.0 / sum));
    // Rounds whole vectors, padding included (never read).
    for (j = 0; j < len; j += L) V::store(s + j, V::round_h(V::mul(V::load(s + j), inv)));
  }

  // out[h][c0 .. c0 + CW * L) = sum_j w[h][j] * v[lo + j][same] for j < len, H heads.
  template <int H, int CW>
  static void pv(const Unit& u, const float* w, int32_t lo, int32_t len, int c0, float* out) {
    const int hd = u.head_dim;
    F acc[H][CW];
    for (int h = 0; h < H; ++h)
      for (int c = 0; c < CW; ++c) acc[h][c] = V::zero();
    for (int32_t j = 0; j < len; ++j) {
      // Later chunks of the row find it in cache.
      if (c0 == 0 && j + kAhead < len) prefetch_row(u, u.v, lo + j + kAhead);
      const uint8_t* vr = row(u, u.v, lo + j);
      F vv[CW];
      for (int c = 0; c < CW; ++c) vv[c] = load_row(vr, c0 + c * L);
      for (int h = 0; h < H; ++h) {
        const F wb = V::set1(w[h * u.ld + j]);
        for (int c = 0; c < CW; ++c) acc[h][c] = V::fma(wb, vv[c], acc[h][c]);
      }
    }
    for (int h = 0; h < H; ++h)
      for (int c = 0; c < CW; ++c) V::store(out + h * hd + c0 + c * L, acc[h][c]);
  }

  // Value chunks of one head block: the widest CW that fits the accumulator budget.
  template <int H>
  static void pv_heads(const Unit& u, const float* w, int32_t lo, int32_t len, float* out) {
    constexpr int kMaxCw = (2 * L / H) < 8 ? (2 * L / H) : 8;  // H * CW accumulators: <= 16 (avx512), 8 (avx2)
    constexpr int kBudget = L == 16 ? 16 : 8;
    constexpr int kCw = kMaxCw * H <= kBudget ? kMaxCw : kBudget / H;
    int c0 = 0;
    const int hd = u.head_dim;
    for (; c0 + kCw * L <= hd; c0 += kCw * L) pv<H, kCw>(u, w, lo, len, c0, out);
    if constexpr (kCw >= 4)
      if (c0 + 4 * L <= hd) { pv<H, 4>(u, w, lo, len, c0, out); c0 += 4 * L; }
    if constexpr (kCw >= 2)
      if (c0 + 2 * L <= hd) { pv<H, 2>(u, w, lo, len, c0, out); c0 += 2 * L; }
    if (c0 < hd) pv<H, 1>(u, w, lo, len, c0, out);
  }

  // Softmax and values of token t, whose score rows start at sc + t * n_heads * ld, column
  // 0 being key u.lo.
  static void finish_token(const Unit& u, float* sc, int32_t t) {
    const int32_t pos = u.hi + t;
    int32_t lo = u.window > 0 && u.tree == 0 ? pos - u.window + 1 : u.lo;
    lo = lo > u.lo ? lo : u.lo;
    const int32_t len = (u.key_last >= 0 ? u.key_last : pos) - lo + 1;
    const int32_t nh = u.n_heads;
    float* rows = sc + static_cast<size_t>(t) * nh * u.ld + (lo - u.lo);
    for (int32_t h = 0; h < nh; ++h) {
      if (__builtin_expect(u.softcap != 0.0f, 0)) softcap_row(rows + h * u.ld, len, u.softcap);
      if (__builtin_expect(u.tree != 0, 0)) mask_tree_keys(u, rows + h * u.ld, lo, len);
      softmax_row(rows + h * u.ld, len);
    }
    float* out = u.out + t * u.q_stride;
    for (int32_t h = 0; h < nh;) {
      const float* w = rows + h * u.ld;
      const int32_t left = nh - h;
      if (left >= 8) { pv_heads<8>(u, w, lo, len, out + h * u.head_dim); h += 8; }
      else if (left >= 4) { pv_heads<4>(u, w, lo, len, out + h * u.head_dim); h += 4; }
      else if (left >= 2) { pv_heads<2>(u, w, lo, len, out + h * u.head_dim); h += 2; }
      else { pv_heads<1>(u, w, lo, len, out + h * u.head_dim); h += 1; }
    }
  }

  static void run(const Unit& u) {
    if (u.tiled) {
      run_tiled(u);
      return;
    }
    const int32_t rows = u.n_tokens * u.n_heads;
    float* sc = u.scratch;
    float* rest = u.scratch + static_cast<size_t>(rows) * u.ld;
    const int32_t khi = u.key_last >= 0 ? u.key_last : u.hi + u.n_tokens - 1;
    if (u.rows_in_lanes) {
      prepare_in_lanes(u, rest);
      scores_in_lanes(u, sc, rest, u.lo, khi);
    } else {
      prepare_one_token(u, rest);
      scores_one_token(u, sc, rest, u.lo, khi);
    }
    for (int32_t t = 0; t < u.n_tokens; ++t) finish_token(u, sc, t);
  }

  // ------------------------------------------------------------------ tiled (flash)

  // Online softmax over tiles of kTileKeys keys (attention_kernels.h): scores of one tile
  // at a time, a running max m and sum l per query row, and the value accumulator
  // rescaled by exp(m_old - m_new) whenever the max grows. Scratch is independent of the
  // context length. Keys klo..khi only (a part of the range under split-KV); the result
  // is either the normalized output or, with u.partial, the row states to be merged.
  static void run_tiled(const Unit& u) {
    const int hd = u.head_dim;
    const int32_t nh = u.n_heads;
    const int32_t rows = u.n_tokens * nh;
    float* sc = u.scratch;
    float* acc = sc + static_cast<size_t>(rows) * u.ld;
    float* tmp = acc + static_cast<size_t>(rows) * hd;
    float* m = tmp + static_cast<size_t>(8) * hd;
    float* l = m + rows;
    float* rest = l + rows;
    for (int32_t r = 0; r < rows; ++r) {
      m[r] = -INFINITY;
      l[r] = 0.0f;
    }
    for (int64_t i = 0; i < static_cast<int64_t>(rows) * hd; i += L) V::store(acc + i, V::zero());
    if (u.rows_in_lanes) prepare_in_lanes(u, rest);
    else prepare_one_token(u, rest);
    const int32_t klo = u.klo, khi = u.khi;
    for (int32_t j0 = klo; j0 <= khi; j0 += kTileKeys) {
      const int32_t j1 = j0 + kTileKeys - 1 < khi ? j0 + kTileKeys - 1 : khi;
      if (u.rows_in_lanes) scores_in_lanes(u, sc, rest, j0, j1);
      else scores_one_token(u, sc, rest, j0, j1);
      for (int32_t t = 0; t < u.n_tokens; ++t) {
        const int32_t pos = u.hi + t;
        int32_t tlo = u.window > 0 && u.tree == 0 ? pos - u.window + 1 : u.lo;
        tlo = tlo > j0 ? tlo : j0;
        const int32_t last = u.key_last >= 0 ? u.key_last : pos;
        const int32_t thi = last < j1 ? last : j1;
        if (tlo > thi) continue;
        const int32_t len = thi - tlo + 1;
        float* w = sc + static_cast<size_t>(t) * nh * u.ld + (tlo - j0);
        for (int32_t h = 0; h < nh; ++h) {
          float* s = w + h * u.ld;
          const int32_t r = t * nh + h;
          if (__builtin_expect(u.softcap != 0.0f, 0)) softcap_row(s, len, u.softcap);
          if (__builtin_expect(u.tree != 0, 0)) mask_tree_keys(u, s, tlo, len);
          int32_t j = 0;
          F mv = V::set1(-INFINITY);
          for (; j + L <= len; j += L) mv = V::max(V::load(s + j), mv);
          float mt = V::hmax(mv);
          for (; j < len; ++j) mt = s[j] > mt ? s[j] : mt;
          const float m_new = mt > m[r] ? mt : m[r];
          const float alpha = m[r] == -INFINITY ? 0.0f : expf(m[r] - m_new);
          const double sum = simd::exp_shifted_sum<V>(s, len, m_new);
          l[r] = l[r] * alpha + static_cast<float>(sum);
          m[r] = m_new;
          if (alpha != 1.0f) {
            const F a = V::set1(alpha);
            for (int c = 0; c < hd; c += L) V::store(acc + r * hd + c, V::mul(V::load(acc + r * hd + c), a));
          }
        }
        for (int32_t h = 0; h < nh;) {
          const int32_t left = nh - h;
          const int H = left >= 8 ? 8 : left >= 4 ? 4 : left >= 2 ? 2 : 1;
          const float* wh = w + h * u.ld;
          if (H == 8) pv_heads<8>(u, wh, tlo, len, tmp);
          else if (H == 4) pv_heads<4>(u, wh, tlo, len, tmp);
          else if (H == 2) pv_heads<2>(u, wh, tlo, len, tmp);
          else pv_heads<1>(u, wh, tlo, len, tmp);
          for (int k = 0; k < H; ++k) {
            float* a = acc + static_cast<size_t>(t * nh + h + k) * hd;
            for (int c = 0; c < hd; c += L) V::store(a + c, V::add(V::load(a + c), V::load(tmp + k * hd + c)));
          }
          h += H;
        }
      }
    }
    for (int32_t t = 0; t < u.n_tokens; ++t)
      for (int32_t h = 0; h < nh; ++h) {
        const int32_t r = t * nh + h;
        const float* a = acc + static_cast<size_t>(r) * hd;
        if (u.partial != nullptr) {
          PartialRow& pr = u.partial[r];
          pr.m = m[r];
          pr.l = l[r];
          for (int c = 0; c < hd; c += L) V::store(pr.acc + c, V::load(a + c));
          continue;
        }
        const F inv = V::set1(l[r] > 0.0f ? 1.0f / l[r] : 0.0f);
        float* o = u.out + t * u.q_stride + static_cast<int64_t>(h) * hd;
        for (int c = 0; c < hd; c += L) V::store(o + c, V::mul(V::load(a + c), inv));
      }
  }
};

}  // namespace
}  // namespace pagoda::attn

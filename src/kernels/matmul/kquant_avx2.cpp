// avx2 bodies of the kquant format kernels (see dot_kernels.h, simd_registry.h). This
// file is compiled for avx2 only and called only when the CPU has it.
//
// dot (decode): one weight row x one Q8_K row, 32 values per vector. vpmaddubsw
// multiplies unsigned levels with the activation quants into int16 pairs (bounded by
// 2 * 63 * 127 < 2^15), vpmaddwd applies the int16 group scale and widens to int32. Level
// offsets (Q6_K: q - 32, Q3_K: q - 4) and the mins of Q2_K/Q4_K/Q5_K are taken back with
// the activation bsums. Each super-block's integer sums are reduced to scalars and
// combined in floats exactly as the tile combines them (combine() below): a horizontal
// sum per super-block, which decode (bound by reading the weights) does not notice, buys
// batch-invariant results.
//
// tile (prefill): see kquant_common.h. 8 tokens per vector; vpmaddubsw of the biased
// token quants with 4 broadcast levels, vpmaddwd with the group scale.
#include "kernels/simd/simd_intrinsics.h"
#include "kernels/simd/vec_avx2.h"

#include <type_traits>

#include "kernels/matmul/activation_body.h"
#include "kernels/matmul/kquant_common.h"
#include "kernels/matmul/simd_registry.h"

namespace pagoda::simd {
namespace {

inline int32_t hsum(__m256i v) { return V256::i_hsum(v); }

// --- dot ------------------------------------------------------------------------------

// A token's result from its super-blocks' exact integer sums: the value sum S (levels x
// quants x group scales) and, for formats with mins, the min sum M (group mins x bsums).
// Per super-block, in order: f = S * d, f = f - M * dmin (fused), acc = acc + f * xd
// (fused). The tile's finish() below rounds the same three times in the same order, so a
// token's result is the same bit for bit whether the dot or the tile computed it, alone
// or in any batch (tests/kernels/batch_invariance_test.cpp): a request's greedy tokens do
// not depend on what it was batched with, or on speculation's verification rows.
//
// Super-blocks go in pairs so that the horizontal sums cost about what the old per-lane
// float accumulation did: one vector holds S0, S1, M0, M1 after three hadds.
struct SbSums {
  __m256i s;  // 8 int32 partial value sums
  __m128i m;  // 4 int32 partial min sums (zero for formats without mins)
};

// [d0, d1, dmin0, dmin1] from each block's d | dmin << 16 (FP16 bits).
inline __m128 scales2(uint32_t a, uint32_t b) {
  return _mm_cvtph_ps(_mm_unpacklo_epi16(_mm_cvtsi32_si128(static_cast<int>(a)), _mm_cvtsi32_si128(static_cast<int>(b))));
}

// kTwo: super-blocks 0 and 1 (else only 0; its sums in slot 0, slot 1 zero).
template <bool kMins, bool kTwo>
inline __m128 combine(__m128 acc, const SbSums& a, const SbSums& b, __m128 dd, float xd0, float xd1) {
  const __m256i r = _mm256_hadd_epi32(a.s, b.s);
  const __m128i r4 = _mm_add_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
  const __m128i t = _mm_hadd_epi32(r4, _mm_hadd_epi32(a.m, b.m));  // S0 S1 M0 M1
  const __m128 sums = _mm_cvtepi32_ps(t);
  __m128 f = _mm_mul_ps(sums, dd);
  if constexpr (kMins) f = _mm_fnmadd_ps(_mm_movehl_ps(sums, sums), _mm_movehl_ps(dd, dd), f);
  acc = _mm_fmadd_ss(f, _mm_set_ss(xd0), acc);
  if constexpr (kTwo) acc = _mm_fmadd_ss(_mm_movehdup_ps(f), _mm_set_ss(xd1), acc);
  return acc;
}

// The dot over super-block pairs. Fmt: sums(block, q8) -> SbSums, dd(block) -> d | dmin << 16.
template <class Fmt, bool kMins>
float dot_sb(int64_t n, const void* vw, const void* vx) {
  const auto* w = static_cast<const typename Fmt::Block*>(vw);
  const auto* x = static_cast<const BlockQ8_K*>(vx);
  const int64_t nb = n / kQK_K;
  __m128 acc = _mm_setzero_ps();
  int64_t i = 0;
  for (; i + 1 < nb; i += 2) {
    const SbSums a = Fmt::sums(w[i], x[i]);
    const SbSums b = Fmt::sums(w[i + 1], x[i + 1]);
    acc = combine<kMins, true>(acc, a, b, scales2(Fmt::dd(w[i]), Fmt::dd(w[i + 1])), x[i].d, x[i + 1].d);
  }
  if (i < nb) {
    const SbSums a = Fmt::sums(w[i], x[i]);
    const SbSums zero{_mm256_setzero_si256(), _mm_setzero_si128()};
    acc = combine<kMins, false>(acc, a, zero, scales2(Fmt::dd(w[i]), 0), x[i].d, 0.0f);
  }
  return _mm_cvtss_f32(acc);
}

template <class Block>
inline uint32_t d_dmin_bits(const Block& b) {
  uint32_t dd;
  std::memcpy(&dd, &b.d, 4);  // d and dmin are adjacent FP16
  return dd;
}

// int16 scale vector [sc[a] x 8 | sc[a + 1] x 8] from 16 int8 scales: groups a, a + 1 of
// 16 values each make up one 32-value vector.
inline __m256i scales_pair(__m128i sc8, int a) {
  const __m128i base = _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
  return _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc8, _mm_add_epi8(base, _mm_set1_epi8(static_cast<char>(a)))));
}

// sum over 8 vectors u[j] (values 32j..32j+31, unsigned) of group-scaled products with q8.
inline __m256i sum16(const __m256i* u, const int8_t* q8, __m128i sc8) {
  __m256i s = _mm256_setzero_si256();
  for (int j = 0; j < 8; ++j)
    s = _mm256_add_epi32(s,
                         _mm256_madd_epi16(_mm256_maddubs_epi16(u[j], load256(q8 + 32 * j)), scales_pair(sc8, 2 * j)));
  return s;
}

template <bool kFive>
struct DotK4 {
  using Block = std::conditional_t<kFive, BlockQ5_K, BlockQ4_K>;
  static uint32_t dd(const Block& b) { return d_dmin_bits(b); }
  static SbSums sums(const Block& w, const BlockQ8_K& x) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    const __m256i sm = _mm256_cvtepu8_epi16(decode_k4_scales(w.scales));  // sc0..7 | m0..7
    const __m256i bs = load256(x.bsums);
    const __m128i bs32 = _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
    const __m128i m = _mm_madd_epi16(bs32, _mm256_extracti128_si256(sm, 1));
    const __m256i sc = _mm256_broadcastsi128_si256(_mm256_castsi256_si128(sm));
    const int8_t* q8 = x.qs;
    __m256i s = _mm256_setzero_si256();
    __m256i lo[4], hi[4];
    if constexpr (kFive) {
      const __m256i h = load256(w.qh);
      q5_levels<0>(w.qs, h, lo[0], hi[0]);
      q5_levels<1>(w.qs, h, lo[1], hi[1]);
      q5_levels<2>(w.qs, h, lo[2], hi[2]);
      q5_levels<3>(w.qs, h, lo[3], hi[3]);
    } else {
      for (int c = 0; c < 4; ++c) {
        const __m256i v = load256(w.qs + 32 * c);
        lo[c] = _mm256_and_si256(v, m4);
        hi[c] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
      }
    }
    for (int c = 0; c < 4; ++c) {
      // int16 lane pattern (2g, 2g + 1) broadcasts scale g.
      const __m256i sl = _mm256_shuffle_epi8(sc, _mm256_set1_epi16(static_cast<int16_t>((4 * c + 1) << 8 | 4 * c)));
      const __m256i sh =
          _mm256_shuffle_epi8(sc, _mm256_set1_epi16(static_cast<int16_t>((4 * c + 3) << 8 | (4 * c + 2))));
      s = _mm256_add_epi32(s, _mm256_madd_epi16(_mm256_maddubs_epi16(lo[c], load256(q8 + 64 * c)), sl));
      s = _mm256_add_epi32(s, _mm256_madd_epi16(_mm256_maddubs_epi16(hi[c], load256(q8 + 64 * c + 32)), sh));
    }
    return {s, m};
  }
};

struct DotQ6K {
  using Block = BlockQ6_K;
  static uint32_t dd(const Block& b) { return b.d; }
  static SbSums sums(const Block& w, const BlockQ8_K& x) {
    __m256i u[8];
    q6_levels(w, 0, u);
    q6_levels(w, 1, u + 4);
    const __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w.scales));
    const __m256i s = sum16(u, x.qs, sc8);
    // Levels are u - 32: take back 32 * sum_g sc_g * bsums_g.
    return {_mm256_sub_epi32(s, _mm256_slli_epi32(_mm256_madd_epi16(load256(x.bsums), _mm256_cvtepi8_epi16(sc8)), 5)),
            _mm_setzero_si128()};
  }
};

struct DotQ3K {
  using Block = BlockQ3_K;
  static uint32_t dd(const Block& b) { return b.d; }
  static SbSums sums(const Block& w, const BlockQ8_K& x) {
    const __m256i hm = load256(w.hmask);
    __m256i u[8];
    q3_levels<0>(w, hm, u);
    q3_levels<1>(w, hm, u + 4);
    const __m128i sc8 = decode_q3_scales(w.scales);
    const __m256i s = sum16(u, x.qs, sc8);
    // Levels are u - 4: take back 4 * sum_g sc_g * bsums_g.
    return {_mm256_sub_epi32(s, _mm256_slli_epi32(_mm256_madd_epi16(load256(x.bsums), _mm256_cvtepi8_epi16(sc8)), 2)),
            _mm_setzero_si128()};
  }
};

struct DotQ2K {
  using Block = BlockQ2_K;
  static uint32_t dd(const Block& b) { return d_dmin_bits(b); }
  static SbSums sums(const Block& w, const BlockQ8_K& x) {
    const __m128i m4 = _mm_set1_epi8(0x0f);
    const __m128i sb = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w.scales));
    const __m128i sc8 = _mm_and_si128(sb, m4);
    const __m256i m16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sb, 4), m4));
    const __m256i pm = _mm256_madd_epi16(load256(x.bsums), m16);
    __m256i u[8];
    q2_levels(w, 0, u);
    q2_levels(w, 1, u + 4);
    return {sum16(u, x.qs, sc8), _mm_add_epi32(_mm256_castsi256_si128(pm), _mm256_extracti128_si256(pm, 1))};
  }
};

template <bool kFive>
float dot_k4(int64_t n, const void* w, const void* x) {
  return dot_sb<DotK4<kFive>, true>(n, w, x);
}
float dot_q6_K(int64_t n, const void* w, const void* x) { return dot_sb<DotQ6K, false>(n, w, x); }
float dot_q3_K(int64_t n, const void* w, const void* x) { return dot_sb<DotQ3K, false>(n, w, x); }
float dot_q2_K(int64_t n, const void* w, const void* x) { return dot_sb<DotQ2K, true>(n, w, x); }

// --- tile -----------------------------------------------------------------------------

// Rows r[0..7] (8 int32 each) become columns: r[i] lane j = old r[j] lane i.
inline void transpose8x8(__m256i* r) {
  __m256i t[8], u[8];
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  // u[4a + c]: 128-bit half H holds rows 4a..4a+3 of column 4H + c.
  for (int a = 0; a < 2; ++a) {
    u[4 * a + 0] = _mm256_unpacklo_epi64(t[4 * a], t[4 * a + 2]);
    u[4 * a + 1] = _mm256_unpackhi_epi64(t[4 * a], t[4 * a + 2]);
    u[4 * a + 2] = _mm256_unpacklo_epi64(t[4 * a + 1], t[4 * a + 3]);
    u[4 * a + 3] = _mm256_unpackhi_epi64(t[4 * a + 1], t[4 * a + 3]);
  }
  for (int c = 0; c < 4; ++c) {
    r[c] = _mm256_permute2x128_si256(u[c], u[4 + c], 0x20);
    r[4 + c] = _mm256_permute2x128_si256(u[c], u[4 + c], 0x31);
  }
}

struct Avx2 {
  static constexpr int kLanes = 8;
  static constexpr int kMaxVecs = 2;
  static constexpr int kMinTileTokens = 5;  // measured: one padded 8-lane vector costs ~5 dots

  static void pack_quants(const uint8_t* x, size_t x_stride, int count, int64_t b, uint8_t* dst) {
    const __m256i bias = _mm256_set1_epi8(static_cast<char>(0x80));
    for (int c = 0; c < 8; ++c) {
      __m256i r[8];
      for (int j = 0; j < 8; ++j)
        r[j] = j < count ? load256(reinterpret_cast<const BlockQ8_K*>(x + j * x_stride)[b].qs + 32 * c)
                         : _mm256_setzero_si256();
      transpose8x8(r);
      for (int i = 0; i < 8; ++i)
        _mm256_store_si256(reinterpret_cast<__m256i*>(dst + (8 * c + i) * 32), _mm256_xor_si256(r[i], bias));
    }
  }

  // 128 * sum_g sc[g] * sum(q in g): pair sums by vpmaddubsw with ones, then vpmaddwd
  // with the scale of each pair's group.
  template <int G>
  static int32_t correction(const WeightSB& w) {
    const __m256i ones = _mm256_set1_epi8(1);
    __m256i acc = _mm256_setzero_si256();
    for (int j = 0; j < 8; ++j) {
      const __m256i s = _mm256_maddubs_epi16(ones, _mm256_load_si256(reinterpret_cast<const __m256i*>(w.q + 32 * j)));
      const __m256i sc = G == 32 ? _mm256_set1_epi16(static_cast<int16_t>(w.sc[j]))
                                 : _mm256_setr_m128i(_mm_set1_epi16(static_cast<int16_t>(w.sc[2 * j])),
                                                     _mm_set1_epi16(static_cast<int16_t>(w.sc[2 * j + 1])));
      acc = _mm256_add_epi32(acc, _mm256_madd_epi16(s, sc));
    }
    return 128 * hsum(acc);
  }

  template <int NP>
  static void finish(const WeightSB& w, const __m256i* tot, const uint8_t* xp, float* acc, int nv) {
    using Lay = XPackLayout<8, NP>;
    for (int v = 0; v < nv; ++v) {
      const uint8_t* p = xp + v * Lay::kBytes;
      __m256 f =
          _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(tot[v], _mm256_set1_epi32(w.corr))), _mm256_set1_ps(w.d));
      if constexpr (NP > 0) {
        __m256i m = _mm256_setzero_si256();
        for (int k = 0; k < NP; ++k)
          m = _mm256_add_epi32(
              m, _mm256_madd_epi16(_mm256_load_si256(reinterpret_cast<const __m256i*>(p + Lay::kBsOff + 32 * k)),
                                   _mm256_set1_epi32(w.mins[k])));
        f = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(m), _mm256_set1_ps(w.dmin), f);
      }
      const __m256 xd = _mm256_load_ps(reinterpret_cast<const float*>(p + Lay::kDOff));
      _mm256_store_ps(acc + 8 * v, _mm256_fmadd_ps(f, xd, _mm256_load_ps(acc + 8 * v)));
    }
  }

  // Bounds: vpmaddubsw pairs are at most 2 * 255 * 32 < 2^15; totals as in the avx512
  // kernel, below 2^31.
  template <int G, int NP, int NV>
  static void rows2(const WeightSB& w0, const WeightSB& w1, const uint8_t* xp, float* a0, float* a1) {
    using Lay = XPackLayout<8, NP>;
    __m256i t0[NV], t1[NV];
    for (int v = 0; v < NV; ++v) t0[v] = t1[v] = _mm256_setzero_si256();
    for (int g = 0; g < kQK_K / G; ++g) {
      const __m256i c0 = _mm256_set1_epi16(static_cast<int16_t>(w0.sc[g]));
      const __m256i c1 = _mm256_set1_epi16(static_cast<int16_t>(w1.sc[g]));
#pragma GCC unroll 8
      for (int k = 0; k < G / 4; ++k) {
        const int kk = g * (G / 4) + k;
        const __m256i b0 = _mm256_set1_epi32(load4(w0.q + 4 * kk));
        const __m256i b1 = _mm256_set1_epi32(load4(w1.q + 4 * kk));
        for (int v = 0; v < NV; ++v) {
          const __m256i xv = _mm256_load_si256(reinterpret_cast<const __m256i*>(xp + v * Lay::kBytes + kk * 32));
          t0[v] = _mm256_add_epi32(t0[v], _mm256_madd_epi16(_mm256_maddubs_epi16(xv, b0), c0));
          t1[v] = _mm256_add_epi32(t1[v], _mm256_madd_epi16(_mm256_maddubs_epi16(xv, b1), c1));
        }
      }
    }
    finish<NP>(w0, t0, xp, a0, NV);
    finish<NP>(w1, t1, xp, a1, NV);
  }
};

template <class Fmt, DotFn Dot>
void tile(int64_t n, const uint8_t* w, size_t w_stride, int64_t rows, const uint8_t* x, size_t x_stride, int64_t tokens,
          float* y, size_t y_stride) {
  TileDriver<Avx2, Fmt, Dot>::tile(n, w, w_stride, rows, x, x_stride, tokens, y, y_stride);
}

}  // namespace

void register_kquant_avx2(DType t, DotKernels& k) {
  switch (t) {
    case DType::Q2_K:
      k.dot = dot_q2_K;
      k.tile = tile<FmtQ2K, dot_q2_K>;
      break;
    case DType::Q3_K:
      k.dot = dot_q3_K;
      k.tile = tile<FmtQ3K, dot_q3_K>;
      break;
    case DType::Q4_K:
      k.dot = dot_k4<false>;
      k.tile = tile<FmtQ4K, dot_k4<false>>;
      break;
    case DType::Q5_K:
      k.dot = dot_k4<true>;
      k.tile = tile<FmtQ5K, dot_k4<true>>;
      break;
    case DType::Q6_K:
      k.dot = dot_q6_K;
      k.tile = tile<FmtQ6K, dot_q6_K>;
      break;
    default:
      return;
  }
  k.quantize_x = Activations<V256>::q8_K;
}

}  // namespace pagoda::simd

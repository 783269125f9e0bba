// avx512 bodies of the kquant format kernels (see dot_kernels.h, simd_registry.h). This
// file is compiled for avx512 only and called only when the CPU has it.
//
// dot (decode): one weight row x one Q8_K row; dot_rows (Q4_K, Q5_K, Q6_K) runs four rows
// at once, sharing the activation loads and prefetching its rows itself (four interleaved
// streams defeat the hardware prefetcher: ~31 -> ~38 GB/s from DRAM per Zen 5 core).
// Per super-block the levels are decoded in registers, 64 at a time; vpmaddubsw
// multiplies them with the activation quants into int16 pairs (bounded by 2 * 63 * 127 <
// 2^15) and vpdpwssd applies the group scales and accumulates in int32. One float FMA per super-block, one horizontal sum per row.
// Levels with an offset (Q6_K: q - 32, Q3_K: q - 4) are multiplied unsigned and the
// offset is taken back with the activation bsums, as are the mins of Q2_K/Q4_K/Q5_K.
//
// tile (prefill): see kquant_common.h. 16 tokens per vector, vpdpbusd for 4 values per
// lane, one vpmulld per group and token vector for the group scale.
#include "kernels/simd/simd_intrinsics.h"
#include "kernels/simd/vec_avx512.h"

#include <type_traits>

#include "kernels/matmul/activation_body.h"
#include "kernels/matmul/kquant_common.h"
#include "kernels/matmul/simd_registry.h"
#include "kernels/simd/transpose_avx512.h"

namespace pagoda::simd {
namespace {

inline __m512i load512(const void* p) { return _mm512_loadu_si512(p); }

// Constant vectors, laid out at compile time so the dots pay one load for each.
struct alignas(64) Vec512 {
  union {
    int8_t b[64];
    int16_t h[32];
    int64_t q[8];
  };
  __m512i load() const { return _mm512_load_si512(this); }
};

// int16 lanes: `per` consecutive lanes take source lane first + i / per.
constexpr Vec512 spread_index(int first, int per) {
  Vec512 v{};
  for (int i = 0; i < 32; ++i) v.h[i] = static_cast<int16_t>(first + i / per);
  return v;
}
// vpshufb control spreading int16 scale 2j over lanes 0-1 and 2j + 1 over lanes 2-3.
constexpr Vec512 k4_scale_control(int j) {
  Vec512 v{};
  for (int i = 0; i < 64; ++i) v.b[i] = static_cast<int8_t>(4 * j + (i >= 32 ? 2 : 0) + (i & 1));
  return v;
}
// Bytes: `lo` in the lower 32, `hi` in the upper 32.
constexpr Vec512 halves8(int lo, int hi) {
  Vec512 v{};
  for (int i = 0; i < 64; ++i) v.b[i] = static_cast<int8_t>(i < 32 ? lo : hi);
  return v;
}
// int16 lanes: `lo` in the lower 16, `hi` in the upper 16.
constexpr Vec512 halves16(int lo, int hi) {
  Vec512 v{};
  for (int i = 0; i < 32; ++i) v.h[i] = static_cast<int16_t>(i < 16 ? lo : hi);
  return v;
}
// 64-bit lanes: `lo` in the lower four, `hi` in the upper four.
constexpr Vec512 halves64(int lo, int hi) {
  Vec512 v{};
  for (int i = 0; i < 8; ++i) v.q[i] = i < 4 ? lo : hi;
  return v;
}

constexpr Vec512 kK4Spread[4] = {k4_scale_control(0), k4_scale_control(1), k4_scale_control(2), k4_scale_control(3)};
constexpr Vec512 kMinsPairs = spread_index(8, 2);  // m0 m0 m1 m1 ... (first 16 lanes)
constexpr Vec512 kGroups16[4] = {spread_index(0, 8), spread_index(4, 8), spread_index(8, 8), spread_index(12, 8)};
constexpr Vec512 kBits01 = halves8(1, 2);  // bit 0 below, bit 1 above
constexpr Vec512 kShift02 = halves64(0, 2), kShift46 = halves64(4, 6);
constexpr Vec512 kQ6Shl = halves64(4, 2), kQ6Shr = halves64(0, 2);
constexpr Vec512 kHighNibbleShift = halves16(0, 4);

inline __m512i spread16(__m256i v, const Vec512& idx) {
  return _mm512_permutexvar_epi16(idx.load(), _mm512_castsi256_si512(v));
}

// --- dot ------------------------------------------------------------------------------

// Q4_K levels of values 64c..64c+63, [group 2c | group 2c + 1]: the 32 bytes qs[32c..]
// in both halves (a broadcast load, no shuffle), the upper half shifted to its high
// nibbles.
inline __m512i q4_levels(const uint8_t* qs, int c) {
  const __m512i v = _mm512_broadcast_i64x4(load256(qs + 32 * c));
  return _mm512_and_si512(_mm512_srlv_epi16(v, kHighNibbleShift.load()), _mm512_set1_epi8(0x0f));
}

// kR rows (row stride ws) against one Q8_K row: y[r] = dot of row r. The activation
// loads are shared by the rows, and each row keeps its own accumulators in the order a
// single row would, so every y[r] is the one-row result bit for bit.
template <bool kFive, int kR>
void dot_k4_rows(int64_t n, const uint8_t* vw, size_t ws, const void* vx, float* y, size_t ahead) {
  using Block = std::conditional_t<kFive, BlockQ5_K, BlockQ4_K>;
  const auto* x = static_cast<const BlockQ8_K*>(vx);
  const __m256i idx_m = _mm512_castsi512_si256(kMinsPairs.load());
  __m512 acc[kR];
  __m256 accm[kR];
#pragma GCC unroll 8
  for (int r = 0; r < kR; ++r) {
    acc[r] = _mm512_setzero_ps();
    accm[r] = _mm256_setzero_ps();
  }
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const __m128 xd = _mm_set1_ps(x[i].d);
    const __m256i bsums = load256(x[i].bsums);
    const int8_t* q8 = x[i].qs;
    __m512i xq[4];
    for (int j = 0; j < 4; ++j) xq[j] = load512(q8 + 64 * j);
#pragma GCC unroll 8
    for (int r = 0; r < kR; ++r) {
      const Block& b = reinterpret_cast<const Block*>(vw + r * ws)[i];
      if (ahead != 0) {
        // Every cache line of this super-block, `ahead` bytes on (see dot_k4_rows_any).
        const auto* p = reinterpret_cast<const char*>(&b) + ahead;
#pragma GCC unroll 4
        for (size_t o = 0; o < sizeof(Block); o += 64) _mm_prefetch(p + o, _MM_HINT_T0);
        _mm_prefetch(p + sizeof(Block) - 1, _MM_HINT_T0);
      }
      const __m256i sm = _mm256_cvtepu8_epi16(decode_k4_scales(b.scales));  // sc0..7, m0..7
      const __m512i sc = _mm512_broadcast_i32x4(_mm256_castsi256_si128(sm));
      // d and dmin (adjacent FP16) in one conversion, times the activation scale.
      uint32_t dd;
      std::memcpy(&dd, &b.d, 4);
      const __m128 ds = _mm_mul_ps(_mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(dd))), xd);
      const __m256i mins = _mm256_permutexvar_epi16(idx_m, sm);  // m0 m0 m1 m1 ...
      const __m256i pm = _mm256_madd_epi16(bsums, mins);
      accm[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(pm),
                                _mm256_permutexvar_ps(_mm256_set1_epi32(1), _mm256_castps128_ps256(ds)), accm[r]);
      __m512i l[4];
      for (int c = 0; c < 4; ++c) l[c] = q4_levels(b.qs, c);
      if constexpr (kFive) {
        // Bit g of qh[l] is bit 4 of value l of group g.
        const __m512i h = _mm512_broadcast_i64x4(load256(b.qh));
        const __m512i b16 = _mm512_set1_epi8(0x10);
        const __m512i sel = kBits01.load();
        for (int j = 0; j < 4; ++j)
          l[j] = _mm512_mask_add_epi8(l[j], _mm512_test_epi8_mask(h, _mm512_slli_epi16(sel, 2 * j)), l[j], b16);
      }
      __m512i s = _mm512_setzero_si512();
      for (int j = 0; j < 4; ++j)
        s = _mm512_dpwssd_epi32(s, _mm512_maddubs_epi16(l[j], xq[j]), _mm512_shuffle_epi8(sc, kK4Spread[j].load()));
      acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_broadcastss_ps(ds), acc[r]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < kR; ++r) y[r] = _mm512_reduce_add_ps(_mm512_sub_ps(acc[r], _mm512_zextps256_ps512(accm[r])));
}

template <bool kFive>
float dot_k4(int64_t n, const void* w, const void* x) {
  float y;
  dot_k4_rows<kFive, 1>(n, static_cast<const uint8_t*>(w), 0, x, &y, 0);
  return y;
}

// How far dot_rows prefetches (as in legacy_avx512.cpp): four interleaved row streams
// defeat the hardware prefetcher.
constexpr size_t kAheadBytes = 8192;

template <bool kFive>
void dot_k4_rows_any(int64_t n, const uint8_t* w, size_t ws, int64_t rows, const void* x, float* y) {
  constexpr int kR = 4;
  const size_t group = kR * ws;
  const size_t ahead = group * ((kAheadBytes + group - 1) / group);
  int64_t r = 0;
  for (; r + kR <= rows; r += kR) dot_k4_rows<kFive, kR>(n, w + r * ws, ws, x, y + r, ahead);
  switch (rows - r) {
    case 3: dot_k4_rows<kFive, 3>(n, w + r * ws, ws, x, y + r, 0); break;
    case 2: dot_k4_rows<kFive, 2>(n, w + r * ws, ws, x, y + r, 0); break;
    case 1: dot_k4_rows<kFive, 1>(n, w + r * ws, ws, x, y + r, 0); break;
    default: break;
  }
}

// The common tail of the 16-value-group formats: levels u (unsigned, 64 per vector)
// times activations, scaled per group by the int16 scales sc16 (16 lanes).
inline __m512i sum_groups16(const __m512i* u, const int8_t* q8, __m256i sc16) {
  __m512i s = _mm512_setzero_si512();
  for (int j = 0; j < 4; ++j)
    s = _mm512_dpwssd_epi32(s, _mm512_maddubs_epi16(u[j], load512(q8 + 64 * j)), spread16(sc16, kGroups16[j]));
  return s;
}

// Two-bit fields 0..3 of each byte of 32 bytes, as [field a | field a+1] (64 levels).
inline __m512i two_bit_pair(__m512i qz, int a) {
  const __m512i shifts = a == 0 ? kShift02.load() : kShift46.load();
  return _mm512_and_si512(_mm512_srlv_epi64(qz, shifts), _mm512_set1_epi8(3));
}

// kR Q6_K rows at once, as dot_k4_rows: shared activation loads, the prefetch, and per
// row the single-row order, so bit for bit equal to dot_q6_K.
template <int kR>
void dot_q6_K_rows(int64_t n, const uint8_t* vw, size_t ws, const void* vx, float* y, size_t ahead) {
  const auto* x = static_cast<const BlockQ8_K*>(vx);
  const __m512i m4 = _mm512_set1_epi8(0x0f);
  const __m512i m30 = _mm512_set1_epi8(0x30);
  const __m512i shl = kQ6Shl.load();
  const __m512i shr = kQ6Shr.load();
  __m512 acc[kR];
#pragma GCC unroll 8
  for (int r = 0; r < kR; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const __m256i bsums = load256(x[i].bsums);
    const float dx = x[i].d;
#pragma GCC unroll 8
    for (int r = 0; r < kR; ++r) {
      const BlockQ6_K& b = reinterpret_cast<const BlockQ6_K*>(vw + r * ws)[i];
      if (ahead != 0) {
        const auto* p = reinterpret_cast<const char*>(&b) + ahead;
#pragma GCC unroll 4
        for (size_t o = 0; o < sizeof(BlockQ6_K); o += 64) _mm_prefetch(p + o, _MM_HINT_T0);
        _mm_prefetch(p + sizeof(BlockQ6_K) - 1, _MM_HINT_T0);
      }
      __m512i u[4];
      for (int h = 0; h < 2; ++h) {
        const __m512i l = load512(b.ql + 64 * h);
        const __m512i hz = _mm512_broadcast_i64x4(load256(b.qh + 32 * h));
        u[2 * h] = _mm512_or_si512(_mm512_and_si512(l, m4), _mm512_and_si512(_mm512_sllv_epi64(hz, shl), m30));
        u[2 * h + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), m4),
                                       _mm512_and_si512(_mm512_srlv_epi64(hz, shr), m30));
      }
      const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales)));
      __m512i s = sum_groups16(u, x[i].qs, sc16);
      // Levels are u - 32: take back 32 * sum_g sc_g * bsums_g.
      const __m256i off = _mm256_slli_epi32(_mm256_madd_epi16(bsums, sc16), 5);
      s = _mm512_sub_epi32(s, _mm512_zextsi256_si512(off));
      acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_set1_ps(dx * half_to_float(b.d)), acc[r]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < kR; ++r) y[r] = _mm512_reduce_add_ps(acc[r]);
}

float dot_q6_K(int64_t n, const void* w, const void* x) {
  float y;
  dot_q6_K_rows<1>(n, static_cast<const uint8_t*>(w), 0, x, &y, 0);
  return y;
}

void dot_q6_K_rows_any(int64_t n, const uint8_t* w, size_t ws, int64_t rows, const void* x, float* y) {
  constexpr int kR = 4;
  const size_t group = kR * ws;
  const size_t ahead = group * ((kAheadBytes + group - 1) / group);
  int64_t r = 0;
  for (; r + kR <= rows; r += kR) dot_q6_K_rows<kR>(n, w + r * ws, ws, x, y + r, ahead);
  switch (rows - r) {
    case 3: dot_q6_K_rows<3>(n, w + r * ws, ws, x, y + r, 0); break;
    case 2: dot_q6_K_rows<2>(n, w + r * ws, ws, x, y + r, 0); break;
    case 1: dot_q6_K_rows<1>(n, w + r * ws, ws, x, y + r, 0); break;
    default: break;
  }
}

float dot_q3_K(int64_t n, const void* vw, const void* vx) {
  const auto* w = static_cast<const BlockQ3_K*>(vw);
  const auto* x = static_cast<const BlockQ8_K*>(vx);
  const __m512i four = _mm512_set1_epi8(4);
  const __m512i sel = kBits01.load();
  __m512 acc = _mm512_setzero_ps();
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const __m512i hm = _mm512_broadcast_i64x4(load256(w[i].hmask));
    __m512i u[4];
    for (int h = 0; h < 2; ++h) {
      const __m512i qz = _mm512_broadcast_i64x4(load256(w[i].qs + 32 * h));
      for (int p = 0; p < 2; ++p) {
        // Levels 32k + l, k = 2p, 2p + 1: high bit is bit 4h + k of hmask[l].
        const __m512i low = two_bit_pair(qz, 2 * p);
        const __mmask64 hi = _mm512_test_epi8_mask(hm, _mm512_slli_epi16(sel, 4 * h + 2 * p));
        u[2 * h + p] = _mm512_mask_add_epi8(low, hi, low, four);
      }
    }
    const __m256i sc16 = _mm256_cvtepi8_epi16(decode_q3_scales(w[i].scales));
    __m512i s = sum_groups16(u, x[i].qs, sc16);
    // Levels are u - 4: take back 4 * sum_g sc_g * bsums_g.
    const __m256i off = _mm256_slli_epi32(_mm256_madd_epi16(load256(x[i].bsums), sc16), 2);
    s = _mm512_sub_epi32(s, _mm512_zextsi256_si512(off));
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_set1_ps(x[i].d * half_to_float(w[i].d)), acc);
  }
  return _mm512_reduce_add_ps(acc);
}

float dot_q2_K(int64_t n, const void* vw, const void* vx) {
  const auto* w = static_cast<const BlockQ2_K*>(vw);
  const auto* x = static_cast<const BlockQ8_K*>(vx);
  __m512 acc = _mm512_setzero_ps();
  __m256 accm = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float dx = x[i].d;
    const __m128i sb = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w[i].scales));
    const __m256i sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(sb, _mm_set1_epi8(0x0f)));
    const __m256i m16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sb, 4), _mm_set1_epi8(0x0f)));
    const __m256i pm = _mm256_madd_epi16(load256(x[i].bsums), m16);
    accm = _mm256_fmadd_ps(_mm256_cvtepi32_ps(pm), _mm256_set1_ps(dx * half_to_float(w[i].dmin)), accm);
    __m512i u[4];
    for (int h = 0; h < 2; ++h) {
      const __m512i qz = _mm512_broadcast_i64x4(load256(w[i].qs + 32 * h));
      u[2 * h] = two_bit_pair(qz, 0);
      u[2 * h + 1] = two_bit_pair(qz, 2);
    }
    const __m512i s = sum_groups16(u, x[i].qs, sc16);
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_set1_ps(dx * half_to_float(w[i].d)), acc);
  }
  return _mm512_reduce_add_ps(_mm512_sub_ps(acc, _mm512_zextps256_ps512(accm)));
}

// --- tile -----------------------------------------------------------------------------

struct Avx512 {
  static constexpr int kLanes = 16;
  static constexpr int kMaxVecs = 4;
  static constexpr int kMinTileTokens = 6;  // measured: one padded 16-lane vector costs ~6 dots

  static void pack_quants(const uint8_t* x, size_t x_stride, int count, int64_t b, uint8_t* dst) {
    const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
    for (int c = 0; c < 4; ++c) {
      __m512i r[16];
      for (int j = 0; j < 16; ++j)
        r[j] = j < count ? load512(reinterpret_cast<const BlockQ8_K*>(x + j * x_stride)[b].qs + 64 * c)
                         : _mm512_setzero_si512();
      transpose16_dwords(r);
      for (int i = 0; i < 16; ++i) _mm512_store_si512(dst + (16 * c + i) * 64, _mm512_xor_si512(r[i], bias));
    }
  }

  // 128 * sum_g sc[g] * sum(q in g): per-4 sums by vpdpbusd with ones, scaled per lane.
  // WeightSB was just written with 32-byte stores; 32-byte loads let them forward.
  template <int G>
  static int32_t correction(const WeightSB& w) {
    const __m256i ones = _mm256_set1_epi8(1);
    const auto* sc = reinterpret_cast<const __m256i*>(w.sc);
    const __m512i scv =
        G == 32 ? _mm512_castsi256_si512(_mm256_load_si256(sc))
                : _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_load_si256(sc)), _mm256_load_si256(sc + 1), 1);
    __m512i acc = _mm512_setzero_si512();
    for (int j = 0; j < 4; ++j) {
      const auto* q = reinterpret_cast<const __m256i*>(w.q + 64 * j);
      const __m512i s = _mm512_inserti64x4(
          _mm512_castsi256_si512(_mm256_dpbusd_epi32(_mm256_setzero_si256(), ones, _mm256_load_si256(q))),
          _mm256_dpbusd_epi32(_mm256_setzero_si256(), ones, _mm256_load_si256(q + 1)), 1);
      const __m512i idx = G == 32 ? _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1)
                                  : _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
      const __m512i lane_sc =
          _mm512_permutexvar_epi32(_mm512_add_epi32(idx, _mm512_set1_epi32(j * (256 / G) / 4)), scv);
      acc = _mm512_add_epi32(acc, _mm512_mullo_epi32(s, lane_sc));
    }
    return 128 * _mm512_reduce_add_epi32(acc);
  }

  template <int NP>
  static void finish(const WeightSB& w, const __m512i* tot, const uint8_t* xp, float* acc, int nv) {
    using Lay = XPackLayout<16, NP>;
    for (int v = 0; v < nv; ++v) {
      const uint8_t* p = xp + v * Lay::kBytes;
      __m512 f =
          _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(tot[v], _mm512_set1_epi32(w.corr))), _mm512_set1_ps(w.d));
      if constexpr (NP > 0) {
        __m512i m = _mm512_setzero_si512();
        for (int k = 0; k < NP; ++k)
          m = _mm512_dpwssd_epi32(m, _mm512_load_si512(p + Lay::kBsOff + 64 * k), _mm512_set1_epi32(w.mins[k]));
        f = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(m), _mm512_set1_ps(w.dmin), f);
      }
      const __m512 xd = _mm512_load_ps(reinterpret_cast<const float*>(p + Lay::kDOff));
      _mm512_store_ps(acc + 16 * v, _mm512_fmadd_ps(f, xd, _mm512_load_ps(acc + 16 * v)));
    }
  }

  // Bounds: a group sum is at most 255 * 32 * 16 (Q6_K) in magnitude, times |sc| <= 128
  // over 16 groups: 2.7e8 < 2^31.
  template <int G, int NP, int NV>
  static void rows2(const WeightSB& w0, const WeightSB& w1, const uint8_t* xp, float* a0, float* a1) {
    using Lay = XPackLayout<16, NP>;
    __m512i t0[NV], t1[NV];
    for (int v = 0; v < NV; ++v) t0[v] = t1[v] = _mm512_setzero_si512();
    for (int g = 0; g < kQK_K / G; ++g) {
      __m512i s0[NV], s1[NV];
      for (int v = 0; v < NV; ++v) s0[v] = s1[v] = _mm512_setzero_si512();
#pragma GCC unroll 8
      for (int k = 0; k < G / 4; ++k) {
        const int kk = g * (G / 4) + k;
        const __m512i b0 = _mm512_set1_epi32(load4(w0.q + 4 * kk));
        const __m512i b1 = _mm512_set1_epi32(load4(w1.q + 4 * kk));
        for (int v = 0; v < NV; ++v) {
          const __m512i xv = _mm512_load_si512(xp + v * Lay::kBytes + kk * 64);
          s0[v] = _mm512_dpbusd_epi32(s0[v], xv, b0);
          s1[v] = _mm512_dpbusd_epi32(s1[v], xv, b1);
        }
      }
      const __m512i c0 = _mm512_set1_epi32(w0.sc[g]);
      const __m512i c1 = _mm512_set1_epi32(w1.sc[g]);
      for (int v = 0; v < NV; ++v) {
        t0[v] = _mm512_add_epi32(t0[v], _mm512_mullo_epi32(s0[v], c0));
        t1[v] = _mm512_add_epi32(t1[v], _mm512_mullo_epi32(s1[v], c1));
      }
    }
    finish<NP>(w0, t0, xp, a0, NV);
    finish<NP>(w1, t1, xp, a1, NV);
  }
};

template <class Fmt, DotFn Dot>
void tile(int64_t n, const uint8_t* w, size_t w_stride, int64_t rows, const uint8_t* x, size_t x_stride, int64_t tokens,
          float* y, size_t y_stride) {
  TileDriver<Avx512, Fmt, Dot>::tile(n, w, w_stride, rows, x, x_stride, tokens, y, y_stride);
}

}  // namespace

void register_kquant_avx512(DType t, DotKernels& k) {
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
      k.dot_rows = dot_k4_rows_any<false>;
      k.tile = tile<FmtQ4K, dot_k4<false>>;
      break;
    case DType::Q5_K:
      k.dot = dot_k4<true>;
      k.dot_rows = dot_k4_rows_any<true>;
      k.tile = tile<FmtQ5K, dot_k4<true>>;
      break;
    case DType::Q6_K:
      k.dot = dot_q6_K;
      k.dot_rows = dot_q6_K_rows_any;
      k.tile = tile<FmtQ6K, dot_q6_K>;
      break;
    default:
      return;
  }
  k.quantize_x = Activations<V512>::q8_K;
}

}  // namespace pagoda::simd

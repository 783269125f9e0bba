// avx512 bodies of the legacy format kernels (see dot_kernels.h, simd_registry.h). This
// file is compiled for avx512 (F, BW, VL, DQ, VNNI) only and called only when the CPU
// has it.
//
// Everything here has internal linkage and uses no std:: templates over shared types, so
// no AVX-512 copy of an inline function can be picked by the linker for code that runs on
// other CPUs.
//
// dot / dot_rows (decode, a GEMV): four blocks per step, two per 512-bit register. The
// weights become unsigned bytes u = q + offset (legacy_layout.h), one dpbusd gives
// sum(u * x) and starts from minus the offset's share, which a second dpbusd computes from
// the activations alone. The four FP16 weight scales of a step are gathered with one word
// permute, converted and multiplied by the activation scales as four floats, then spread
// over their lanes, so each block costs a handful of instructions and one FMA per pair.
// dot_rows runs four rows at once: the activation loads, scales and offset share are
// computed once for the four, and with the per-row work alone the kernel reads ~37 GB/s
// of Q4_0 per Zen 5 core from L3 (~29 row by row). Four interleaved row streams defeat
// the hardware prefetcher, so dot_rows prefetches itself, a few groups of rows ahead.
//
// tile (prefill, compute bound): rows in lanes. Sixteen weight rows are transposed into
// eight registers per block (lane r = 4 consecutive quants of row r, as signed bytes),
// once per call; each activation dword is broadcast to all lanes, so one dpbusd does 64
// multiply-adds for 16 rows, and a 16 x 12 register block of rows x tokens reuses every
// load. dpbusd multiplies u8 by s8: the activations are staged as x + 128 (0..255 for any
// int8 x) and the weights stay signed, so the correction -128 * sum(w) is per row and
// block, computed once at repack. Per token and block the 8 dpbusd share the multiply
// pipes with one cvt, mul and FMA for the block scales, which bounds the kernel at about
// 80% of the dpbusd peak; on Zen 5 it reaches ~65% (650-700 GFLOPS per core, measured
// with bench/micro/legacy_bench.cc), repacking included.
//
#include "kernels/simd/simd_intrinsics.h"
#include "kernels/simd/vec_avx2.h"
#include "kernels/simd/vec_avx512.h"
#include <type_traits>

#include "kernels/simd/avx512_common.h"
#include "kernels/matmul/activation_body.h"
#include "kernels/matmul/legacy_layout.h"
#include "kernels/matmul/legacy_tile.h"
#include "kernels/matmul/simd_registry.h"
#include "kernels/simd/tile_buffer.h"
#include "quant/blocks.h"

namespace pagoda::simd {
namespace {

inline float hsum(__m256 v) { return V256::hsum(v); }

using legacy::kXBytes;
using legacy::kXQs;
using legacy::Layout;



inline float hsum(__m512 v) { return hsum(_mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1))); }

// ---------------------------------------------------------------- dot (GEMV)

// The FP16 field at byte kAt of four consecutive kBytes-byte blocks, gathered by one
// vpermt2w from two 64-byte loads: the group's start and the 64 bytes at word
// second_words<kBytes>(), both inside the group (4 * kBytes >= 72 bytes).
struct Idx32 {
  alignas(64) int16_t v[32];
};

template <int kBytes>
constexpr int second_words() {
  return 2 * kBytes - 32 < 32 ? 2 * kBytes - 32 : 32;
}

// Whether the four fields sit inside the two loads.
template <int kBytes, int kAt>
constexpr bool spread_ok() {
  for (int k = 0; k < 4; ++k) {
    const int p = (k * kBytes + kAt) / 2;
    if (p >= 32 && (p < second_words<kBytes>() || p >= second_words<kBytes>() + 32)) return false;
  }
  return kBytes % 2 == 0 && kAt % 2 == 0 && 4 * kBytes >= 64 + 2 * second_words<kBytes>();
}

// Word indices putting the four fields in words 0..3 (and repeating them).
template <int kBytes, int kAt>
constexpr Idx32 four_index() {
  Idx32 r{};
  for (int i = 0; i < 32; ++i) {
    const int p = ((i % 4) * kBytes + kAt) / 2;
    r.v[i] = static_cast<int16_t>(p < 32 ? p : 32 + p - second_words<kBytes>());
  }
  return r;
}
template <int kBytes, int kAt>
inline constexpr Idx32 kFour = four_index<kBytes, kAt>();

template <int kBytes, int kAt>
inline __m128 four_fp16(const uint8_t* group) {
  static_assert(spread_ok<kBytes, kAt>());
  const __m512i lo = _mm512_loadu_si512(group);
  const __m512i hi = _mm512_loadu_si512(group + 2 * second_words<kBytes>());
  const __m512i v = _mm512_permutex2var_epi16(lo, _mm512_load_si512(kFour<kBytes, kAt>.v), hi);
  return _mm_cvtph_ps(_mm512_castsi512_si128(v));
}
// Float lanes: 8 of block kFirst, then 8 of block kFirst + 1 (the lanes of their dpbusd).
template <int kFirst>
inline __m512 pair_lanes(__m128 v) {
  const __m512i idx = _mm512_set_epi32(kFirst + 1, kFirst + 1, kFirst + 1, kFirst + 1, kFirst + 1, kFirst + 1,
                                       kFirst + 1, kFirst + 1, kFirst, kFirst, kFirst, kFirst, kFirst, kFirst,
                                       kFirst, kFirst);
  return _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(v));
}

// Weight blocks a and b as unsigned bytes u = q + offset, in value order (a's 32, b's 32).
template <typename B>
inline __m512i weights_pair(const uint8_t* a, const uint8_t* b) {
  using L = Layout<B>;
  if constexpr (L::kBits == 8) {
    const __m512i v = _mm512_inserti64x4(_mm512_castsi256_si512(load256(a + L::kQs)), load256(b + L::kQs), 1);
    return _mm512_xor_si512(v, _mm512_set1_epi8(static_cast<char>(0x80)));
  } else {
    // [qs_a, qs_a, qs_b, qs_b], then low nibbles in the even 128-bit lanes, high in the odd.
    __m512i v = _mm512_broadcast_i32x4(load128(a + L::kQs));
    v = _mm512_mask_broadcast_i32x4(v, 0xFF00, load128(b + L::kQs));
    // Shift counts per 16-bit word: 0 in the even 128-bit lanes, 4 in the odd ones.
    const long long k4 = 0x0004000400040004LL;
    const __m512i counts = _mm512_set_epi64(k4, k4, 0, 0, k4, k4, 0, 0);
    v = _mm512_and_si512(_mm512_srlv_epi16(v, counts), _mm512_set1_epi8(0x0f));
    if constexpr (L::kBits == 5) {
      const uint64_t h = load32(a + L::kQh) | (static_cast<uint64_t>(load32(b + L::kQh)) << 32);
      v = _mm512_mask_add_epi8(v, _cvtu64_mask64(h), v, _mm512_set1_epi8(16));
    }
    return v;
  }
}

// One weight block as unsigned bytes, for the tail of a row.
template <typename B>
inline __m256i weights_one(const uint8_t* a) {
  using L = Layout<B>;
  if constexpr (L::kBits == 8) {
    return _mm256_xor_si256(load256(a + L::kQs), _mm256_set1_epi8(static_cast<char>(0x80)));
  } else {
    const __m128i q = load128(a + L::kQs);
    __m256i v = _mm256_inserti128_si256(_mm256_castsi128_si256(q), _mm_srli_epi16(q, 4), 1);
    v = _mm256_and_si256(v, _mm256_set1_epi8(0x0f));
    if constexpr (L::kBits == 5)
      v = _mm256_mask_add_epi8(v, _cvtu32_mask32(load32(a + L::kQh)), v, _mm256_set1_epi8(16));
    return v;
  }
}

inline __m512i x_pair(const uint8_t* a, const uint8_t* b) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(load256(a + kXQs)), load256(b + kXQs), 1);
}

// The blocks past the last full step of four, one at a time (the tail of a row).
template <typename B>
float dot_tail(int64_t i, int64_t nb, const uint8_t* w, const uint8_t* x) {
  using L = Layout<B>;
  constexpr int kB = sizeof(B);
  const __m256i off = _mm256_set1_epi8(static_cast<char>(L::kMin ? 1 : L::kOffset));
  __m256 tail = _mm256_setzero_ps();
  const __m256i zero8 = _mm256_setzero_si256();
  for (; i < nb; ++i) {
    const uint8_t* wb = w + i * kB;
    const uint8_t* xb = x + i * kXBytes;
    const __m256i xq = load256(xb + kXQs);
    __m256i d = _mm256_dpbusd_epi32(zero8, weights_one<B>(wb), xq);
    const __m256i c = _mm256_dpbusd_epi32(zero8, off, xq);
    const float dx = half(xb);
    if constexpr (L::kMin) {
      tail = _mm256_fmadd_ps(_mm256_cvtepi32_ps(c), _mm256_set1_ps(half(wb + L::kM) * dx), tail);
    } else {
      d = _mm256_sub_epi32(d, c);
    }
    tail = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d), _mm256_set1_ps(half(wb) * dx), tail);
  }
  return hsum(tail);
}

// kR rows (row stride ws) against one activation row: y[r] = dot of row r. What depends
// only on the activations (their loads, scales and the offset's dpbusd) is done once per
// step for all rows, and each row keeps its own accumulators in the same order as a
// single row would, so every y[r] is the one-row result bit for bit.
template <typename B, int kR>
void dot_rows_fixed(int64_t n, const uint8_t* w, size_t ws, const uint8_t* x, float* y, size_t ahead) {
  using L = Layout<B>;
  constexpr int kB = sizeof(B);
  const int64_t nb = n / kQK;
  const __m512i zero = _mm512_setzero_si512();
  const __m512i off = _mm512_set1_epi8(static_cast<char>(L::kMin ? 1 : L::kOffset));
  __m512 acc0[kR], acc1[kR], accm0[kR], accm1[kR];
#pragma GCC unroll 8
  for (int r = 0; r < kR; ++r) acc0[r] = acc1[r] = accm0[r] = accm1[r] = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 4 <= nb; i += 4) {
    const uint8_t* xg = x + i * kXBytes;
    const __m128 xs = four_fp16<kXBytes, 0>(xg);
    const __m512i x0 = x_pair(xg, xg + kXBytes);
    const __m512i x1 = x_pair(xg + 2 * kXBytes, xg + 3 * kXBytes);
    // The offset's share (or, with a min, the plain sum of x). Without a min the rows'
    // dpbusd start from its negation, which takes it off for free.
    const __m512i c0 = _mm512_dpbusd_epi32(zero, off, x0);
    const __m512i c1 = _mm512_dpbusd_epi32(zero, off, x1);
    __m512 cf0, cf1;
    __m512i base0 = zero, base1 = zero;
    if constexpr (L::kMin) {
      cf0 = _mm512_cvtepi32_ps(c0);
      cf1 = _mm512_cvtepi32_ps(c1);
    } else {
      base0 = _mm512_sub_epi32(zero, c0);
      base1 = _mm512_sub_epi32(zero, c1);
    }
#pragma GCC unroll 8
    for (int r = 0; r < kR; ++r) {
      const uint8_t* wg = w + r * ws + i * kB;
      if (ahead != 0) {
        // Every cache line of these four blocks, `ahead` bytes on: with several rows read
        // at once the hardware prefetcher no longer keeps up with DRAM on its own.
        const uint8_t* p = wg + ahead;
#pragma GCC unroll 4
        for (int o = 0; o < 4 * kB; o += 64) _mm_prefetch(reinterpret_cast<const char*>(p + o), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(p + 4 * kB - 1), _MM_HINT_T0);
      }
      // The four blocks' dw * dx, multiplied before they are spread over lanes.
      const __m128 s = _mm_mul_ps(four_fp16<kB, 0>(wg), xs);
      const __m512 s0 = pair_lanes<0>(s), s1 = pair_lanes<2>(s);
      const __m512i u0 = weights_pair<B>(wg, wg + kB);
      const __m512i u1 = weights_pair<B>(wg + 2 * kB, wg + 3 * kB);
      const __m512i d0 = _mm512_dpbusd_epi32(base0, u0, x0);
      const __m512i d1 = _mm512_dpbusd_epi32(base1, u1, x1);
      if constexpr (L::kMin) {
        const __m128 m = _mm_mul_ps(four_fp16<kB, L::kM>(wg), xs);
        accm0[r] = _mm512_fmadd_ps(cf0, pair_lanes<0>(m), accm0[r]);
        accm1[r] = _mm512_fmadd_ps(cf1, pair_lanes<2>(m), accm1[r]);
      }
      acc0[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d0), s0, acc0[r]);
      acc1[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d1), s1, acc1[r]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < kR; ++r) {
    __m512 a = _mm512_add_ps(acc0[r], acc1[r]);
    if constexpr (L::kMin) a = _mm512_add_ps(a, _mm512_add_ps(accm0[r], accm1[r]));
    y[r] = hsum(a) + dot_tail<B>(i, nb, w + r * ws, x);
  }
}

template <typename B>
float dot(int64_t n, const void* w, const void* x) {
  float y;
  dot_rows_fixed<B, 1>(n, static_cast<const uint8_t*>(w), 0, static_cast<const uint8_t*>(x), &y, 0);
  return y;
}

// The last 1 .. kR rows, in one call (matmul's ranges of 16 rows never leave any).
template <typename B, int kR>
void dot_rows_left(int64_t n, const uint8_t* w, size_t ws, int64_t rows, const uint8_t* x, float* y) {
  if constexpr (kR > 0) {
    if (rows == kR) return dot_rows_fixed<B, kR>(n, w, ws, x, y, 0);
    dot_rows_left<B, kR - 1>(n, w, ws, rows, x, y);
  }
}

// How far dot_rows prefetches: about DRAM latency times one core's read bandwidth
// (measured on Zen 5: 4 KB is too little, 16 KB starts to cost in L3-resident matrices).
constexpr size_t kAheadBytes = 8192;
constexpr int64_t kShortQ8Row = 1024;

// Rows in fours (eight accumulators, or sixteen with a min, fit the 32 registers with the
// shared activation values), the last one to three in one call.
template <typename B>
void dot_rows(int64_t n, const uint8_t* w, size_t ws, int64_t rows, const void* xv, float* y) {
  constexpr int kR = 4;
  const auto* x = static_cast<const uint8_t*>(xv);
  int64_t r = 0;
  // Short Q8_0 rows (Gemma 3's 640) save too little work per row to pay for four streams
  // and their prefetches: one row at a time was ~10% faster from DRAM (262144 x 640).
  if (Layout<B>::kBits == 8 && n < kShortQ8Row) {
    for (; r < rows; ++r) y[r] = dot<B>(n, w + r * ws, x);
    return;
  }
  // Whole groups of rows ahead, so lines are prefetched in the order they are read.
  const size_t group = kR * ws;
  const size_t ahead = group * ((kAheadBytes + group - 1) / group);
  for (; r + kR <= rows; r += kR) dot_rows_fixed<B, kR>(n, w + r * ws, ws, x, y + r, ahead);
  dot_rows_left<B, kR - 1>(n, w + r * ws, ws, rows - r, x, y + r);
}

// ---------------------------------------------------------------- tile (GEMM)

using legacy_tile::kTok;
using legacy_tile::kXStride;
using legacy_tile::XStage;

// A repacked panel of 16 weight rows, per block: 8 registers of quants (lane r = bytes
// 4j..4j+3 of row r, signed), the FP32 row scales, -128 * the row's sum of quants, and the
// FP32 mins for Q4_1/Q5_1.
template <typename B>
constexpr int panel_regs() {
  return Layout<B>::kMin ? 11 : 10;
}
constexpr int kPanelD = 8, kPanelC = 9, kPanelM = 10;

// Repacks rows [0, valid) of the weights at w (row stride ws) into `out`, panel_regs<B>()
// registers per block. Rows past `valid` repeat the last row (their outputs are never
// stored). `next` (or null) is the following panel's first row and `next_rows` its row
// count: its blocks are prefetched alongside, so they arrive from memory while this panel
// is multiplied (with few tokens, as in batched decode, memory time would otherwise add
// to compute time instead of hiding behind it).
template <typename B>
void repack(const uint8_t* w, size_t ws, int64_t valid, int64_t nb, Z64* out, const uint8_t* next, int64_t next_rows) {
  using L = Layout<B>;
  constexpr int kB = sizeof(B);
  const uint8_t* rp[16];
  for (int r = 0; r < 16; ++r) rp[r] = w + (r < valid ? r : valid - 1) * ws;
  const __m512i ones = _mm512_set1_epi8(1);
  const __m512i lo4 = _mm512_set1_epi8(0x0f);
  for (int64_t b = 0; b < nb; ++b, out += panel_regs<B>()) {
    const int64_t at = b * kB;
    if (next != nullptr && (at & 63) < kB)  // once per cache line of the rows
      for (int64_t r = 0; r < next_rows; ++r) _mm_prefetch(reinterpret_cast<const char*>(next + r * ws + at), _MM_HINT_T1);
    // The dword at byte `byte` of block b of each row.
    auto gather16 = [&](int byte) {
      // Through memory: cheaper than vpgatherdd here, and the failed store forwarding
      // only adds latency, which the out-of-order core hides behind other blocks.
      alignas(64) uint32_t tmp[16];
      for (int r = 0; r < 16; ++r) tmp[r] = load32(rp[r] + at + byte);
      return _mm512_load_si512(tmp);
    };
    __m512i q[8];
    // 16 rows x 4 dwords -> 4 registers of one dword from each row, lanes in row order.
    auto transpose4 = [&](int byte0, __m512i* t) {
      __m512i z[4];
      for (int g = 0; g < 4; ++g) {
        __m512i v = _mm512_castsi128_si512(load128(rp[g] + at + byte0));
        v = _mm512_inserti32x4(v, load128(rp[g + 4] + at + byte0), 1);
        v = _mm512_inserti32x4(v, load128(rp[g + 8] + at + byte0), 2);
        z[g] = _mm512_inserti32x4(v, load128(rp[g + 12] + at + byte0), 3);
      }
      const __m512i a0 = _mm512_unpacklo_epi32(z[0], z[1]);
      const __m512i a1 = _mm512_unpackhi_epi32(z[0], z[1]);
      const __m512i a2 = _mm512_unpacklo_epi32(z[2], z[3]);
      const __m512i a3 = _mm512_unpackhi_epi32(z[2], z[3]);
      t[0] = _mm512_unpacklo_epi64(a0, a2);
      t[1] = _mm512_unpackhi_epi64(a0, a2);
      t[2] = _mm512_unpacklo_epi64(a1, a3);
      t[3] = _mm512_unpackhi_epi64(a1, a3);
    };
    if constexpr (L::kBits == 8) {
      transpose4(L::kQs, q);
      transpose4(L::kQs + 16, q + 4);
    } else {
      __m512i t[4];
      transpose4(L::kQs, t);
      for (int j = 0; j < 4; ++j) {
        q[j] = _mm512_and_si512(t[j], lo4);
        q[j + 4] = _mm512_and_si512(_mm512_srli_epi16(t[j], 4), lo4);
      }
      if constexpr (L::kBits == 5) {
        // Bit v of a row's qh is value v's fifth bit: replicate qh byte k over the 4 bytes
        // of its dword, then test each byte against its own bit. Q5_0 wants
        // (nibble | bit << 4) - 16, i.e. nibble - 16 where the bit is clear.
        const __m512i qh = gather16(L::kQh);
        const __m512i bits_lo = _mm512_set1_epi32(0x08040201);
        const __m512i bits_hi = _mm512_set1_epi32(static_cast<int>(0x80402010u));
        const __m512i sixteen = _mm512_set1_epi8(16);
        // pshufb indices of the first byte of each dword in its 128-bit lane, 4 times.
        const __m512i dword_base = _mm512_set4_epi32(0x0C0C0C0C, 0x08080808, 0x04040404, 0);
        for (int k = 0; k < 4; ++k) {
          const __m512i rep =
              _mm512_shuffle_epi8(qh, _mm512_add_epi8(dword_base, _mm512_set1_epi8(static_cast<char>(k))));
          // Byte k holds values 8k..8k+7: the low nibble is dword 2k's 4 values, the high
          // nibble dword 2k+1's.
          __m512i& v0 = q[2 * k];
          __m512i& v1 = q[2 * k + 1];
          if constexpr (L::kOffset != 0) {
            static_assert(L::kOffset == 16);
            v0 = _mm512_mask_sub_epi8(v0, _mm512_testn_epi8_mask(rep, bits_lo), v0, sixteen);
            v1 = _mm512_mask_sub_epi8(v1, _mm512_testn_epi8_mask(rep, bits_hi), v1, sixteen);
          } else {
            v0 = _mm512_mask_add_epi8(v0, _mm512_test_epi8_mask(rep, bits_lo), v0, sixteen);
            v1 = _mm512_mask_add_epi8(v1, _mm512_test_epi8_mask(rep, bits_hi), v1, sixteen);
          }
        }
      } else if constexpr (L::kOffset != 0) {
        const __m512i o = _mm512_set1_epi8(static_cast<char>(L::kOffset));
        for (int j = 0; j < 8; ++j) q[j] = _mm512_sub_epi8(q[j], o);
      }
    }
    // Row sums of the signed quants, for the -128 * sum(w) correction. Nibble formats add
    // bytes first: 8 values fit a signed byte (Q4_0 -64..56, Q5_0 -128..120, Q4_1 0..120),
    // Q5_1 needs two halves (0..124 each); Q8_0 sums in dwords directly.
    __m512i sum = _mm512_setzero_si512();
    if constexpr (L::kBits == 8) {
      for (int j = 0; j < 8; ++j) sum = _mm512_dpbusd_epi32(sum, ones, q[j]);
    } else {
      const __m512i s0 = _mm512_add_epi8(_mm512_add_epi8(q[0], q[1]), _mm512_add_epi8(q[2], q[3]));
      const __m512i s1 = _mm512_add_epi8(_mm512_add_epi8(q[4], q[5]), _mm512_add_epi8(q[6], q[7]));
      if constexpr (L::kBits == 5 && L::kMin) {
        sum = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(sum, ones, s0), ones, s1);
      } else {
        sum = _mm512_dpbusd_epi32(sum, ones, _mm512_add_epi8(s0, s1));
      }
    }
    for (int j = 0; j < 8; ++j) _mm512_store_si512(out + j, q[j]);
    const __m512i dm = gather16(0);
    _mm512_store_ps(out + kPanelD, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dm)));
    _mm512_store_si512(out + kPanelC, _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(sum, 7)));
    if constexpr (L::kMin) {
      static_assert(L::kM == 2);
      _mm512_store_ps(out + kPanelM, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dm, 16))));
    }
  }
}

// 16 rows by kT tokens: y[t * ys + r] for the panels at p and the staged tokens at xq/xd/xs
// (already offset to the first token). kT = 12 keeps 12 integer and 12 float accumulators
// in registers and 12 independent dpbusd chains in flight.
template <bool kMin, int kT>
void micro(int64_t nb, const Z64* p, const uint8_t* xq, const float* xd, const float* xs, float* y, size_t ys,
           int64_t valid) {
  constexpr int kR = kMin ? 11 : 10;
  __m512 accf[kT];
#pragma GCC unroll 16
  for (int t = 0; t < kT; ++t) accf[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b, p += kR, xq += kXStride, xd += kTok, xs += kTok) {
    __m512i acc[kT];
    const __m512i c = _mm512_load_si512(p + kPanelC);
#pragma GCC unroll 16
    for (int t = 0; t < kT; ++t) acc[t] = c;
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
      const __m512i wq = _mm512_load_si512(p + j);
#pragma GCC unroll 16
      for (int t = 0; t < kT; ++t)
        acc[t] = _mm512_dpbusd_epi32(acc[t], bcast(xq + t * 32 + 4 * j), wq);
    }
    const __m512 dw = _mm512_load_ps(p + kPanelD);
#pragma GCC unroll 16
    for (int t = 0; t < kT; ++t)
      accf[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[t]), _mm512_mul_ps(dw, _mm512_set1_ps(xd[t])), accf[t]);
    if constexpr (kMin) {
      const __m512 mw = _mm512_load_ps(p + kPanelM);
#pragma GCC unroll 16
      for (int t = 0; t < kT; ++t) accf[t] = _mm512_fmadd_ps(mw, _mm512_set1_ps(xs[t]), accf[t]);
    }
  }
  const __mmask16 mask = row_mask(valid);
#pragma GCC unroll 16
  for (int t = 0; t < kT; ++t) _mm512_mask_storeu_ps(y + t * ys, mask, accf[t]);
}

// All staged tokens against one panel (the split is below).
template <bool kMin>
void micro_tokens(int64_t nb, const Z64* p, const XStage& st, int64_t tokens, float* y, size_t ys, int64_t valid) {
  int64_t t = 0;
  auto run = [&](auto tag) {
    constexpr int kN = decltype(tag)::value;
    micro<kMin, kN>(nb, p, st.q + t * 32, st.d + t, st.s + t, y + t * ys, ys, valid);
    t += kN;
  };
  // Blocks of 12, except that 16-19 left go as 8 + 8: a block of 4 keeps too few dpbusd
  // chains in flight (batched decode often has 16 tokens).
  while (tokens - t >= 20 || (tokens - t >= 12 && tokens - t < 16)) run(std::integral_constant<int, 12>{});
  if (tokens - t >= 16) run(std::integral_constant<int, 8>{});
  if (tokens - t >= 8) run(std::integral_constant<int, 8>{});
  if (tokens - t >= 4) run(std::integral_constant<int, 4>{});
  if (tokens - t >= 2) run(std::integral_constant<int, 2>{});
  if (tokens - t >= 1) run(std::integral_constant<int, 1>{});
}

// The target for legacy_tile.h: panels of 16 rows, activations staged as x + 128.
struct Avx512Tile {
  using Reg = Z64;
  static constexpr int64_t kRows = 16;
  template <typename B>
  static constexpr bool kFlip = true;
  template <typename B>
  static constexpr int panel_regs() {
    return simd::panel_regs<B>();
  }
  template <typename B>
  static float dot(int64_t n, const void* w, const void* x) {
    return simd::dot<B>(n, w, x);
  }
  template <typename B>
  static void repack(const uint8_t* w, size_t ws, int64_t valid, int64_t nb, Z64* out, const uint8_t* next,
                     int64_t next_rows) {
    simd::repack<B>(w, ws, valid, nb, out, next, next_rows);
  }
  template <typename B>
  static void micro_tokens(int64_t nb, const Z64* p, const XStage& st, int64_t tokens, float* y, size_t ys,
                           int64_t valid) {
    simd::micro_tokens<Layout<B>::kMin>(nb, p, st, tokens, y, ys, valid);
  }
};

template <typename B>
void fill(DotKernels& k) {
  k.dot = dot<B>;
  k.dot_rows = dot_rows<B>;
  k.tile = legacy_tile::tile<Avx512Tile, B>;
  k.quantize_x = Activations<V512>::q8_0;
}

}  // namespace

void register_legacy_avx512(DType t, DotKernels& k) {
  legacy::with_block(t, [&]<typename B>() { fill<B>(k); });
}

}  // namespace pagoda::simd

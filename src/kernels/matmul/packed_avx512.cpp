// avx512 bodies of the packed-panel kernels (packed_weights.h, packed_layout.h). Compiled
// for avx512 (F, BW, VL, DQ, VNNI) only and called only when the CPU has it; internal
// linkage throughout (see legacy_avx512.cpp for why).
//
// Both bodies run one panel (16 rows in the lanes) block by block: the block's integer
// dot for every row starts from -offset * sum(x) (one broadcast), then each activation
// dword, broadcast, feeds one dpbusd with a register of weight quants (Q4_0's nibbles are
// split with an and and a shift first; Q5_0 then ORs in its fifth bits, looked up by
// vpermd from four bits of qh per register), and the FP32 accumulator takes
// cvt(int) * (d_w * d_x) with one FMA. The tile runs up to 12 tokens per panel pass so
// the unpacked weight registers are reused across tokens; the GEMV runs one.
//
// The GEMV of Q5_0 and Q8_0 leaves its panel stream to the hardware prefetcher: software
// prefetches 4 KB ahead made decode 13-20% slower on Zen 5 (Qwen2.5-Coder 0.5B, a 1B
// shape in Q8_0; two threads, six alternating rounds), as they do in bench/bandwidth.cc's
// plain sum (47 GB/s plain vs 39 prefetching on two threads). Q4_0, with the least work
// per line, still gains from them (the 1B shape: 5% slower without).
#include "kernels/simd/simd_intrinsics.h"

#include <type_traits>

#include "kernels/simd/avx512_common.h"
#include "kernels/matmul/packed_layout.h"
#include "kernels/matmul/packed_weights.h"
#include "kernels/simd/tile_buffer.h"
#include "quant/blocks.h"

namespace pagoda::simd {
namespace {

using packed::Layout;

constexpr int kXBytes = sizeof(BlockQ8_0);
constexpr int kXQs = offsetof(BlockQ8_0, qs);
constexpr int kTok = 64;              // tokens staged per tile call (matmul hands at most 64)
constexpr int kXStride = kTok * 32;   // bytes of staged quants per block

// How far ahead the GEMV prefetches its panel stream (0: not at all), see above.
template <typename B>
constexpr size_t kAheadBytes = std::is_same_v<B, BlockQ4_0> ? 4096 : 0;

inline __m512 scales(const uint8_t* blk, size_t at) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + at)));
}

// -offset * sum of a 32-quant activation block: the SAD of (x + 128) against zero.
template <typename B>
inline int32_t correction(const uint8_t* xq) {
  const __m256i u =
      _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq)), _mm256_set1_epi8(static_cast<char>(0x80)));
  const __m256i s = _mm256_sad_epu8(u, _mm256_setzero_si256());
  const __m128i s2 = _mm_add_epi64(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
  const int64_t sum = _mm_cvtsi128_si64(s2) + _mm_extract_epi64(s2, 1) - 32 * 128;
  return static_cast<int32_t>(-Layout<B>::kOffset * sum);
}

// Q5_0's fifth bits of values 4j..4j+3 as 16 in their bytes: the four bits at 4j of each
// lane's qh word index a table of the 16 possible byte patterns (vpermd reads only the
// low four bits of an index).
struct alignas(64) SpreadTable {
  uint32_t v[16];
};
constexpr SpreadTable make_spread_table() {
  SpreadTable t{};
  for (uint32_t n = 0; n < 16; ++n)
    for (uint32_t m = 0; m < 4; ++m)
      if ((n >> m) & 1) t.v[n] |= 0x10u << (8 * m);
  return t;
}
inline constexpr SpreadTable kSpread = make_spread_table();

inline __m512i fifth_bits(__m512i qh, int j) {
  return _mm512_permutexvar_epi32(_mm512_srl_epi32(qh, _mm_cvtsi32_si128(4 * j)), _mm512_load_si512(kSpread.v));
}

// Register pair k of a nibble format, unpacked: values 4k.. (lo) and 16+4k.. (hi).
template <typename B>
inline void nibble_pair(const uint8_t* blk, int k, __m512i& lo, __m512i& hi) {
  const __m512i lo4 = _mm512_set1_epi8(0x0f);
  const __m512i v = _mm512_loadu_si512(blk + 64 * k);
  lo = _mm512_and_si512(v, lo4);
  hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), lo4);
  if constexpr (Layout<B>::kHighBits) {
    const __m512i qh = _mm512_loadu_si512(blk + Layout<B>::kQhAt);
    lo = _mm512_or_si512(lo, fifth_bits(qh, k));
    hi = _mm512_or_si512(hi, fifth_bits(qh, k + 4));
  }
}

// The weight registers of one block, unpacked to u = q + offset.
template <typename B>
inline void weights(const uint8_t* blk, __m512i* w) {
  if constexpr (Layout<B>::kRegs == 8) {
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) w[j] = _mm512_loadu_si512(blk + 64 * j);
  } else {
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) nibble_pair<B>(blk, k, w[k], w[k + 4]);
  }
}

// Per-block activation terms of a GEMV call; local types, so no TileBuffer instance
// compiled here can be shared with another file's at link time.
struct ActTerms {
  int32_t corr;
  float dx;
};
thread_local TileBuffer<ActTerms> t_terms;

template <typename B>
void gemv(int64_t n, const uint8_t* panels, int64_t rows, const uint8_t* x, float* y) {
  using L = Layout<B>;
  const int64_t nb = n / kQK;
  ActTerms* terms = t_terms.get(static_cast<size_t>(nb));
  for (int64_t b = 0; b < nb; ++b) {
    terms[b].corr = correction<B>(x + b * kXBytes + kXQs);
    terms[b].dx = _cvtsh_ss(load16(x + b * kXBytes));
  }
  const size_t panel_bytes = static_cast<size_t>(nb) * L::kBlockBytes;
  const size_t total = panel_bytes * static_cast<size_t>((rows + kPanelRows - 1) / kPanelRows);
  for (int64_t r0 = 0; r0 < rows; r0 += kPanelRows) {
    const size_t at = static_cast<size_t>(r0 / kPanelRows) * panel_bytes;
    __m512 acc = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      const size_t off = at + static_cast<size_t>(b) * L::kBlockBytes;
      const uint8_t* blk = panels + off;
      if constexpr (kAheadBytes<B> != 0)
        if (off + kAheadBytes<B> + L::kBlockBytes <= total) prefetch_block<_MM_HINT_T0>(blk + kAheadBytes<B>, L::kBlockBytes);
      const uint8_t* xq = x + b * kXBytes + kXQs;
      __m512i w[8];
      weights<B>(blk, w);
      // Two chains of four dpbusd: the sum is an exact integer either way.
      __m512i a0 = _mm512_set1_epi32(terms[b].corr), a1 = _mm512_setzero_si512();
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        a0 = _mm512_dpbusd_epi32(a0, w[j], bcast(xq + 4 * j));
        a1 = _mm512_dpbusd_epi32(a1, w[j + 4], bcast(xq + 16 + 4 * j));
      }
      const __m512 s = _mm512_mul_ps(scales(blk, L::kScaleAt), _mm512_set1_ps(terms[b].dx));
      acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(a0, a1)), s, acc);
    }
    const int64_t valid = rows - r0;
    const __mmask16 mask = row_mask(valid);
    _mm512_mask_storeu_ps(y + r0, mask, acc);
  }
}

// Staged activations of up to kTok tokens, block-major: q[b][t] = the 32 quants,
// d[b][t] = the scale, c[b][t] = -offset * sum of the quants.
struct XStage {
  uint8_t* q;
  float* d;
  int32_t* c;
};

thread_local TileBuffer<Z64> t_xbuf;

template <typename B>
XStage stage(const uint8_t* x, size_t x_stride, int64_t tokens, int64_t nb) {
  const size_t q_regs = static_cast<size_t>(nb) * kXStride / 64;
  const size_t f_regs = static_cast<size_t>(nb) * kTok * 4 / 64;
  Z64* buf = t_xbuf.get(q_regs + 2 * f_regs);
  const XStage st{buf[0].b, reinterpret_cast<float*>(buf + q_regs), reinterpret_cast<int32_t*>(buf + q_regs + f_regs)};
  for (int64_t t = 0; t < tokens; ++t) {
    const uint8_t* row = x + t * x_stride;
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* blk = row + b * kXBytes;
      std::memcpy(st.q + b * kXStride + t * 32, blk + kXQs, 32);
      st.d[b * kTok + t] = _cvtsh_ss(load16(blk));
      st.c[b * kTok + t] = correction<B>(blk + kXQs);
    }
  }
  return st;
}

// One panel by kT tokens (staged at q/d/c, already offset to the first token).
template <typename B, int kT>
void micro(int64_t nb, const uint8_t* panel, const uint8_t* q, const float* d, const int32_t* c, float* y, size_t ys,
           __mmask16 mask, bool prefetch_next) {
  using L = Layout<B>;
  const size_t next = static_cast<size_t>(nb) * L::kBlockBytes;  // the next panel's block b
  __m512 accf[kT];
#pragma GCC unroll 16
  for (int t = 0; t < kT; ++t) accf[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b, panel += L::kBlockBytes, q += kXStride, d += kTok, c += kTok) {
    // The first pass over a panel prefetches the next panel into L2: with few tokens, as
    // in batched decode, the weights come from DRAM, and without it their latency adds to
    // the work (262144 x 640 Q8_0 by 16 tokens: 17 ms before, 10 ms with).
    if (prefetch_next) prefetch_block<_MM_HINT_T1>(panel + next, L::kBlockBytes);
    __m512i acc[kT];
#pragma GCC unroll 16
    for (int t = 0; t < kT; ++t) acc[t] = _mm512_set1_epi32(c[t]);
    if constexpr (L::kRegs == 8) {
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) {
        const __m512i w = _mm512_loadu_si512(panel + 64 * j);
#pragma GCC unroll 16
        for (int t = 0; t < kT; ++t) acc[t] = _mm512_dpbusd_epi32(acc[t], w, bcast(q + t * 32 + 4 * j));
      }
    } else {
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
        __m512i wl, wh;
        nibble_pair<B>(panel, k, wl, wh);
#pragma GCC unroll 16
        for (int t = 0; t < kT; ++t) {
          acc[t] = _mm512_dpbusd_epi32(acc[t], wl, bcast(q + t * 32 + 4 * k));
          acc[t] = _mm512_dpbusd_epi32(acc[t], wh, bcast(q + t * 32 + 16 + 4 * k));
        }
      }
    }
    const __m512 dw = scales(panel, L::kScaleAt);
#pragma GCC unroll 16
    for (int t = 0; t < kT; ++t)
      accf[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[t]), _mm512_mul_ps(dw, _mm512_set1_ps(d[t])), accf[t]);
  }
#pragma GCC unroll 16
  for (int t = 0; t < kT; ++t) _mm512_mask_storeu_ps(y + t * ys, mask, accf[t]);
}

template <typename B>
void tile(int64_t n, const uint8_t* panels, int64_t rows, const uint8_t* x, size_t x_stride, int64_t tokens, float* y,
          size_t y_stride) {
  using L = Layout<B>;
  const int64_t nb = n / kQK;
  const size_t panel_bytes = static_cast<size_t>(nb) * L::kBlockBytes;
  for (int64_t t0 = 0; t0 < tokens; t0 += kTok) {
    const int64_t tc = tokens - t0 < kTok ? tokens - t0 : kTok;
    const XStage st = stage<B>(x + t0 * x_stride, x_stride, tc, nb);
    for (int64_t r0 = 0; r0 < rows; r0 += kPanelRows) {
      const uint8_t* panel = panels + static_cast<size_t>(r0 / kPanelRows) * panel_bytes;
      const int64_t valid = rows - r0;
      const __mmask16 mask = row_mask(valid);
      float* yp = y + t0 * y_stride + r0;
      int64_t t = 0;
      auto run = [&](auto tag) {
        constexpr int kN = decltype(tag)::value;
        micro<B, kN>(nb, panel, st.q + t * 32, st.d + t, st.c + t, yp + t * y_stride, y_stride, mask,
                     t == 0 && r0 + kPanelRows < rows);
        t += kN;
      };
      // Blocks of 12, except that 16-19 left go as 8 + 8 (more dpbusd chains in flight).
      while (tc - t >= 20 || (tc - t >= 12 && tc - t < 16)) run(std::integral_constant<int, 12>{});
      if (tc - t >= 16) run(std::integral_constant<int, 8>{});
      if (tc - t >= 8) run(std::integral_constant<int, 8>{});
      if (tc - t >= 4) run(std::integral_constant<int, 4>{});
      if (tc - t >= 2) run(std::integral_constant<int, 2>{});
      if (tc - t >= 1) run(std::integral_constant<int, 1>{});
    }
  }
}

}  // namespace

void register_packed_avx512(DType t, PackedKernels& k) {
  if (t == DType::Q4_0) {
    k.gemv = gemv<BlockQ4_0>;
    k.tile = tile<BlockQ4_0>;
  }
  if (t == DType::Q8_0) {
    k.gemv = gemv<BlockQ8_0>;
    k.tile = tile<BlockQ8_0>;
  }
  if (t == DType::Q5_0) {
    k.gemv = gemv<BlockQ5_0>;
    k.tile = tile<BlockQ5_0>;
  }
}

}  // namespace pagoda::simd

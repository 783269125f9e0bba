// avx512 bodies of the packed Q6_K kernels (packed_weights.h; layout in packed_layout.h,
// K6Layout). Compiled for avx512 (F, BW, VL, DQ, VNNI) only and called only when the CPU
// has it; internal linkage throughout (see legacy_avx512.cpp for why).
//
// Per super-block and panel, for every row in its lane: a ql register gives two
// registers of 6-bit levels u = q + 32 (its low and its high nibbles, each ORed with the
// matching 2-bit field of the qh register shifted to bits 4-5: one vpternlogd), each
// feeding one dpbusd against a broadcast activation dword. A sub-block's (16 values)
// integer dot starts from -32 * its activation sum (Q8_K's bsums), so it comes out as
// sum(q * x) with no correction pass; converted, times the sub-block's scale, it is summed
// in FP32 by FMA in the order kSubBlockOrder lists (each product is exact, |q x| sum times
// |scale| < 2^23, and so are the partial sums below 2^24; vpmulld, two port-0 uops per
// sub-block and token, cost the tile ~10% more), and acc += isum * (d * dx) once per
// super-block. The GEMV is the tile's body on one token, so the two agree bit for bit, and
// the AMX tile sums in the same order.
//
// Single thread from DRAM, Qwen2.5-Coder 1.5B's output matrix (151936 x 1536): 15-23 GB/s
// here (repeated runs on a noisy machine), 13.5-14 for the row-major dot one row at a
// time, 6-7 for dot_rows four at a time (bench/micro: packed_gemv/Q6_K, gemv_dot/Q6_K,
// gemv_rows/Q6_K). A first layout that kept the file's order (all ql, then all qh) in
// blocks of 52.5 lines ran at 7-12.7: the blocks are now read front to back and start on
// a line, their d in line-sized pairs between them (packed_layout.h).
#include "kernels/simd/simd_intrinsics.h"

#include <cstring>
#include <type_traits>

#include "kernels/simd/avx512_common.h"
#include "kernels/matmul/packed_k6_body.h"
#include "kernels/matmul/packed_layout.h"
#include "kernels/matmul/packed_weights.h"
#include "kernels/simd/tile_buffer.h"
#include "kernels/simd/token_blocks.h"
#include "quant/blocks.h"

namespace pagoda::simd {
namespace {

constexpr size_t kXBsums = offsetof(BlockQ8_K, bsums);
constexpr int kTok = 64;  // tokens per tile call (matmul hands at most 64)

// Per token and super-block: the activation scale and each sub-block's -32 * sum(x).
struct XSums {
  float d;
  int32_t start[16];
};
thread_local TileBuffer<XSums> t_sums;

inline void x_sums(const uint8_t* xblk, XSums& s) {
  std::memcpy(&s.d, xblk, sizeof(float));
  int16_t bs[16];
  std::memcpy(bs, xblk + kXBsums, sizeof(bs));
  for (int j = 0; j < 16; ++j) s.start[j] = -32 * static_cast<int32_t>(bs[j]);
}

// Ql register group s (0: ql bytes 0-31 of the half, 1: 32-63) of half n for kT tokens:
// both nibble halves, sub-blocks 8n + 2s + kh (low) and 8n + 2s + 4 + kh (high).
template <int kT, int kN, int kS>
inline void group(const uint8_t* blk, const uint8_t* xq, size_t xs, const XSums* sums, __m512* isum) {
  const __m512i lo4 = _mm512_set1_epi8(0x0f), m30 = _mm512_set1_epi8(0x30);
#pragma GCC unroll 2
  for (int kh = 0; kh < 2; ++kh) {
    const int sub_lo = 8 * kN + 2 * kS + kh, sub_hi = sub_lo + 4;
    __m512i lo[kT], hi[kT];
#pragma GCC unroll 8
    for (int t = 0; t < kT; ++t) {
      lo[t] = _mm512_set1_epi32(sums[t].start[sub_lo]);
      hi[t] = _mm512_set1_epi32(sums[t].start[sub_hi]);
    }
#pragma GCC unroll 4
    for (int k = 4 * kh; k < 4 * kh + 4; ++k) {
      const __m512i q = _mm512_loadu_si512(blk + L::ql_at(kN, kS, k));
      const __m512i h = _mm512_loadu_si512(blk + L::qh_at(kN, k));
      const __m512i ul = levels(_mm512_and_si512(q, lo4), high_field<kS, 0>(h), m30);
      const __m512i uh = levels(_mm512_and_si512(_mm512_srli_epi16(q, 4), lo4), high_field<kS, 1>(h), m30);
      const int v = 128 * kN + 32 * kS + 4 * k;
#pragma GCC unroll 8
      for (int t = 0; t < kT; ++t) {
        lo[t] = _mm512_dpbusd_epi32(lo[t], ul, bcast(xq + t * xs + v));
        hi[t] = _mm512_dpbusd_epi32(hi[t], uh, bcast(xq + t * xs + v + 64));
      }
    }
    const __m512 sl = scale_floats(blk, sub_lo), sh = scale_floats(blk, sub_hi);
#pragma GCC unroll 8
    for (int t = 0; t < kT; ++t) {
      isum[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(lo[t]), sl, isum[t]);
      isum[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(hi[t]), sh, isum[t]);
    }
  }
}

// One panel by kT tokens. x: the first token's Q8_K row (stride xs); sums[b * sum_stride + t].
// prefetch_next: prefetch the next panel into L2 (the tile's first pass over a panel; the
// GEMV leaves its stream to the hardware prefetcher, see packed_avx512.cpp).
template <int kT>
void micro(int64_t nb, const uint8_t* panel0, const uint8_t* x, size_t xs, const XSums* sums, size_t sum_stride,
           float* y, size_t ys, __mmask16 mask, bool prefetch_next) {
  const size_t next = packed::panel_bytes<L>(nb);
  __m512 accf[kT];
#pragma GCC unroll 8
  for (int t = 0; t < kT; ++t) accf[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b, sums += sum_stride) {
    const uint8_t* panel = panel0 + packed::block_at<L>(b);
    if (prefetch_next) prefetch_block<_MM_HINT_T1>(panel + next, L::kBlockBytes);
    const uint8_t* xq = x + b * sizeof(BlockQ8_K) + kXQs;
    __m512 isum[kT];
#pragma GCC unroll 8
    for (int t = 0; t < kT; ++t) isum[t] = _mm512_setzero_ps();
    group<kT, 0, 0>(panel, xq, xs, sums, isum);
    group<kT, 0, 1>(panel, xq, xs, sums, isum);
    group<kT, 1, 0>(panel, xq, xs, sums, isum);
    group<kT, 1, 1>(panel, xq, xs, sums, isum);
    const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(panel0 + packed::scales_at<L>(b))));
#pragma GCC unroll 8
    for (int t = 0; t < kT; ++t)
      accf[t] = _mm512_fmadd_ps(isum[t], _mm512_mul_ps(d, _mm512_set1_ps(sums[t].d)), accf[t]);
  }
#pragma GCC unroll 8
  for (int t = 0; t < kT; ++t) _mm512_mask_storeu_ps(y + t * ys, mask, accf[t]);
}

void gemv(int64_t n, const uint8_t* panels, int64_t rows, const uint8_t* x, float* y) {
  const int64_t nb = n / kQK_K;
  const size_t panel_bytes = packed::panel_bytes<L>(nb);
  XSums* sums = t_sums.get(static_cast<size_t>(nb));
  for (int64_t b = 0; b < nb; ++b) x_sums(x + b * sizeof(BlockQ8_K), sums[b]);
  for (int64_t r0 = 0; r0 < rows; r0 += kPanelRows)
    micro<1>(nb, panels + static_cast<size_t>(r0 / kPanelRows) * panel_bytes, x, 0, sums, 1, y + r0, 0,
             row_mask(rows - r0), false);
}

void tile(int64_t n, const uint8_t* panels, int64_t rows, const uint8_t* x, size_t x_stride, int64_t tokens, float* y,
          size_t y_stride) {
  const int64_t nb = n / kQK_K;
  const size_t panel_bytes = packed::panel_bytes<L>(nb);
  XSums* sums = t_sums.get(static_cast<size_t>(nb) * kTok);
  for (int64_t t0 = 0; t0 < tokens; t0 += kTok) {
    const int64_t tc = tokens - t0 < kTok ? tokens - t0 : kTok;
    const uint8_t* xt = x + t0 * x_stride;
    for (int64_t t = 0; t < tc; ++t)
      for (int64_t b = 0; b < nb; ++b) x_sums(xt + t * x_stride + b * sizeof(BlockQ8_K), sums[b * kTok + t]);
    for (int64_t r0 = 0; r0 < rows; r0 += kPanelRows) {
      const uint8_t* panel = panels + static_cast<size_t>(r0 / kPanelRows) * panel_bytes;
      const __mmask16 mask = row_mask(rows - r0);
      float* yp = y + t0 * y_stride + r0;
      // Four accumulators per token (two sub-block partials, the super-block's int sum,
      // the FP32 sum): five tokens and the weight registers fit the 32 registers.
      for_token_blocks<5, 4, 2, 1>(tc, [&](int64_t t, auto tag) {
        constexpr int kN = decltype(tag)::value;
        micro<kN>(nb, panel, xt + t * x_stride, x_stride, sums + t, kTok, yp + t * y_stride, y_stride, mask,
                  t == 0 && r0 + kPanelRows < rows);
      });
    }
  }
}

}  // namespace

void register_packed_k6_avx512(PackedKernels& k) {
  k.gemv = gemv;
  k.tile = tile;
}

}  // namespace pagoda::simd

// avx512 bodies of the packed Q4_K kernels (packed_weights.h; layout in packed_layout.h,
// K4Layout). Compiled for avx512 (F, BW, VL, DQ, VNNI) only and called only when the CPU
// has it; internal linkage throughout (see legacy_avx512.cpp for why).
//
// Per super-block and panel, for every row in its lane: each sub-block's integer dot
// sum(q * x) comes from 8 dpbusd (a register of nibbles against a broadcast activation
// dword), converted and times the sub-block's 6-bit scale, summed in FP32 by FMA in
// sub-block order (exact: each product is under 2^24 and so is the sum but for contrived
// inputs, as the int32 sum converted once was; vpmulld, two port-0 uops, cost the tiles
// 5-15% more); the mins need only the activations' sums per sub-block (from Q8_K's
// bsums), so four vpdpwssd of the mins (widened to 16 bits, in pairs) against broadcast
// pairs of those sums give sum(m * xsum). Then acc += isum * (d * dx) and acc -=
// cvt(msum) * (dmin * dx), in that order in every body (the AMX tile too), so the tiles
// equal the GEMV bit for bit.
#include "kernels/simd/simd_intrinsics.h"

#include <type_traits>

#include "kernels/simd/avx512_common.h"
#include "kernels/matmul/packed_k4_body.h"
#include "kernels/matmul/packed_layout.h"
#include "kernels/matmul/packed_weights.h"
#include "kernels/simd/tile_buffer.h"
#include "kernels/simd/token_blocks.h"
#include "quant/blocks.h"

namespace pagoda::simd {
namespace {

void gemv(int64_t n, const uint8_t* panels, int64_t rows, const uint8_t* x, float* y) {
  const int64_t nb = n / kQK_K;
  const size_t panel_bytes = static_cast<size_t>(nb) * L::kBlockBytes;
  const __m512i lo4 = _mm512_set1_epi8(0x0f), hi4 = _mm512_set1_epi8(static_cast<char>(0xf0));
  for (int64_t r0 = 0; r0 < rows; r0 += kPanelRows) {
    const size_t at = static_cast<size_t>(r0 / kPanelRows) * panel_bytes;
    __m512 acc = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      const size_t off = at + static_cast<size_t>(b) * L::kBlockBytes;
      const uint8_t* blk = panels + off;
      const uint8_t* xblk = x + b * sizeof(BlockQ8_K);
      const uint8_t* xq = xblk + kXQs;
      __m512 isum = _mm512_setzero_ps();
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) {
        __m512i lo = _mm512_setzero_si512(), hi = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int k = 0; k < 8; ++k) {
          const __m512i v = _mm512_loadu_si512(blk + (8 * c + k) * 64);
          lo = _mm512_dpbusd_epi32(lo, _mm512_and_si512(v, lo4), bcast(xq + 64 * c + 4 * k));
          hi = _mm512_dpbusd_epi32(hi, _mm512_and_si512(v, hi4), bcast(xq + 64 * c + 32 + 4 * k));
        }
        isum = _mm512_fmadd_ps(_mm512_cvtepi32_ps(lo), scale_floats(blk, 2 * c), isum);
        isum = _mm512_fmadd_ps(_mm512_cvtepi32_ps(hi), scale_floats_x16(blk, 2 * c + 1), isum);
      }
      int32_t pairs[4];
      sum_pairs(xblk, pairs);
      __m512i msum = _mm512_setzero_si512();
#pragma GCC unroll 4
      for (int i = 0; i < 4; ++i) msum = _mm512_dpwssd_epi32(msum, min_pairs(blk, i), _mm512_set1_epi32(pairs[i]));
      const __m512 dx = _mm512_set1_ps(x_scale(xblk));
      acc = _mm512_fmadd_ps(isum, _mm512_mul_ps(halves(blk + L::kDAt), dx), acc);
      acc = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(msum), _mm512_mul_ps(halves(blk + L::kDminAt), dx), acc);
    }
    const int64_t valid = rows - r0;
    const __mmask16 mask = row_mask(valid);
    _mm512_mask_storeu_ps(y + r0, mask, acc);
  }
}

constexpr int kTok = 64;  // tokens per tile call (matmul hands at most 64)

thread_local TileBuffer<XSums> t_sums;

// One panel by kT tokens. x: the first token's Q8_K row (stride xs); sums[b * kTok + t].
template <int kT>
void micro(int64_t nb, const uint8_t* panel, const uint8_t* x, size_t xs, const XSums* sums, float* y, size_t ys,
           __mmask16 mask, bool prefetch_next) {
  const __m512i lo4 = _mm512_set1_epi8(0x0f), hi4 = _mm512_set1_epi8(static_cast<char>(0xf0));
  const size_t next = static_cast<size_t>(nb) * L::kBlockBytes;
  __m512 accf[kT];
#pragma GCC unroll 8
  for (int t = 0; t < kT; ++t) accf[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b, panel += L::kBlockBytes, sums += kTok) {
    // The first pass over a panel prefetches the next panel into L2 (as packed_avx512.cpp).
    if (prefetch_next) prefetch_block<_MM_HINT_T1>(panel + next, L::kBlockBytes);
    const uint8_t* xq = x + b * sizeof(BlockQ8_K) + kXQs;
    __m512 isum[kT];
#pragma GCC unroll 8
    for (int t = 0; t < kT; ++t) isum[t] = _mm512_setzero_ps();
    // Sub-blocks 2c and 2c+1 share their loads: the low and high nibbles of a register.
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      __m512i lo[kT], hi[kT];
#pragma GCC unroll 8
      for (int t = 0; t < kT; ++t) lo[t] = hi[t] = _mm512_setzero_si512();
#pragma GCC unroll 8
      for (int k = 0; k < 8; ++k) {
        const __m512i v = _mm512_loadu_si512(panel + (8 * c + k) * 64);
        const __m512i wl = _mm512_and_si512(v, lo4);
        const __m512i wh = _mm512_and_si512(v, hi4);
#pragma GCC unroll 8
        for (int t = 0; t < kT; ++t) {
          lo[t] = _mm512_dpbusd_epi32(lo[t], wl, bcast(xq + t * xs + 64 * c + 4 * k));
          hi[t] = _mm512_dpbusd_epi32(hi[t], wh, bcast(xq + t * xs + 64 * c + 32 + 4 * k));
        }
      }
      const __m512 sl = scale_floats(panel, 2 * c), sh = scale_floats_x16(panel, 2 * c + 1);
#pragma GCC unroll 8
      for (int t = 0; t < kT; ++t) {
        isum[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(lo[t]), sl, isum[t]);
        isum[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(hi[t]), sh, isum[t]);
      }
    }
    const __m512 d = halves(panel + L::kDAt), dmin = halves(panel + L::kDminAt);
#pragma GCC unroll 8
    for (int t = 0; t < kT; ++t) {
      __m512i msum = _mm512_setzero_si512();
#pragma GCC unroll 4
      for (int i = 0; i < 4; ++i)
        msum = _mm512_dpwssd_epi32(msum, min_pairs(panel, i), _mm512_set1_epi32(sums[t].pairs[i]));
      const __m512 dx = _mm512_set1_ps(sums[t].d);
      accf[t] = _mm512_fmadd_ps(isum[t], _mm512_mul_ps(d, dx), accf[t]);
      accf[t] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(msum), _mm512_mul_ps(dmin, dx), accf[t]);
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < kT; ++t) _mm512_mask_storeu_ps(y + t * ys, mask, accf[t]);
}

void tile(int64_t n, const uint8_t* panels, int64_t rows, const uint8_t* x, size_t x_stride, int64_t tokens, float* y,
          size_t y_stride) {
  const int64_t nb = n / kQK_K;
  const size_t panel_bytes = static_cast<size_t>(nb) * L::kBlockBytes;
  XSums* sums = t_sums.get(static_cast<size_t>(nb) * kTok);
  for (int64_t t0 = 0; t0 < tokens; t0 += kTok) {
    const int64_t tc = tokens - t0 < kTok ? tokens - t0 : kTok;
    const uint8_t* xt = x + t0 * x_stride;
    stage_sums(xt, x_stride, tc, nb, sums, kTok);
    for (int64_t r0 = 0; r0 < rows; r0 += kPanelRows) {
      const uint8_t* panel = panels + static_cast<size_t>(r0 / kPanelRows) * panel_bytes;
      const int64_t valid = rows - r0;
      const __mmask16 mask = row_mask(valid);
      float* yp = y + t0 * y_stride + r0;
      // Five tokens at most: two partial sums per token for the paired sub-blocks, plus
      // its sum and accumulator, and the weight registers fit the 32 registers (six
      // spilled to the stack: 650 vs 655-670 tok/s at pp512 on the 1B shape).
      for_token_blocks<5, 4, 2, 1>(tc, [&](int64_t t, auto tag) {
        constexpr int kN = decltype(tag)::value;
        micro<kN>(nb, panel, xt + t * x_stride, x_stride, sums + t, yp + t * y_stride, y_stride, mask,
                  t == 0 && r0 + kPanelRows < rows);
      });
    }
  }
}

}  // namespace

void register_packed_k4_avx512(PackedKernels& k) {
  k.gemv = gemv;
  k.tile = tile;
}

}  // namespace pagoda::simd

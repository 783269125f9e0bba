// amx body of the packed Q4_K tile (packed_weights.h; layout in packed_layout.h,
// K4Layout). Compiled for AVX-512 VNNI + AMX-INT8 and called only where
// cpu_features().amx_int8 holds; internal linkage throughout.
//
// The VNNI tile spends most of its time on the integer dots: 64 dpbusd per token, 16
// rows and super-block, so from about 8 tokens (speculative verification, batched
// decode) it is bound by them rather than by reading the weights. Here each sub-block's
// dots for up to 16 tokens are one tdpbsud: the panel's registers are already the B tile
// layout (a register = 16 rows x 4 quants), so a super-block's nibbles are unpacked once
// into eight 8 x 64-byte B tiles, and the tokens' Q8_K quants are loaded as A tiles
// straight from the activation rows. What is left per token is the part that makes the
// result equal the GEMV bit for bit: sum_j dot_j * scale_j by FMA in sub-block order, the
// mins term by vpdpwssd, and the two FMAs in the GEMV's order (packed_k4_avx512.cpp).
#include "kernels/simd/simd_intrinsics.h"

#include "kernels/matmul/packed_amx_driver.h"
#include "kernels/matmul/packed_k4_body.h"
#include "kernels/matmul/packed_layout.h"
#include "kernels/matmul/packed_weights.h"
#include "kernels/simd/amx_common.h"
#include "kernels/simd/avx512_common.h"
#include "kernels/simd/tile_buffer.h"
#include "quant/blocks.h"

namespace pagoda::simd {
namespace {

constexpr int kTok = kAmxTok;
constexpr int kChunk = 32;  // tokens whose C tiles are held at once: 8 x 32 x 64 B in L1
// Below this many tokens the VNNI tile is as fast (its dots are not yet the limit).
constexpr int64_t kMinTokens = 6;

PackedTileFn g_vnni_tile = nullptr;  // the body below kMinTokens

struct alignas(64) Scratch {
  Z64 b[2][8][8];     // sub-block j's B tile (8 rows of 16 x 4 nibbles), two blocks' worth
  Z64 c[8][kChunk];   // sub-block j's dots, a token per line
  Z64 acc[kTok];      // the panel's FP32 accumulators, a token per line
};
thread_local Scratch t_scratch;
thread_local TileBuffer<XSums> t_sums;

inline void unpack_nibbles(const uint8_t* blk, Z64 (*out)[8]) {
  const __m512i lo4 = _mm512_set1_epi8(0x0f), hi4 = _mm512_set1_epi8(static_cast<char>(0xf0));
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c)
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {
      const __m512i v = _mm512_loadu_si512(blk + (8 * c + k) * 64);
      _mm512_store_si512(out[2 * c][k].b, _mm512_and_si512(v, lo4));
      _mm512_store_si512(out[2 * c + 1][k].b, _mm512_and_si512(v, hi4));
    }
}

void tile(int64_t n, const uint8_t* panels, int64_t rows, const uint8_t* x, size_t x_stride, int64_t tokens, float* y,
          size_t y_stride) {
  if (tokens < kMinTokens) {
    g_vnni_tile(n, panels, rows, x, x_stride, tokens, y, y_stride);
    return;
  }
  const int64_t nb = n / kQK_K;
  XSums* sums = t_sums.get(static_cast<size_t>(nb) * kTok);
  Scratch& s = t_scratch;
  auto stage = [&](const uint8_t* xt, int64_t tc) { stage_sums(xt, x_stride, tc, nb, sums, kTok); };
  auto run_panel = [&](const uint8_t* panel, bool prefetch_next, const uint8_t* xt, int64_t tc) {
    const size_t panel_bytes = static_cast<size_t>(nb) * L::kBlockBytes;
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* blk = panel + static_cast<size_t>(b) * L::kBlockBytes;
      if (prefetch_next) prefetch_block<_MM_HINT_T1>(blk + panel_bytes, L::kBlockBytes);
      // The next block's nibbles are unpacked before this block's tiles load theirs: a
      // tile load right after the stores that wrote its bytes waits for them.
      if (b == 0) unpack_nibbles(blk, s.b[0]);
      if (b + 1 < nb) unpack_nibbles(blk + L::kBlockBytes, s.b[(b + 1) & 1]);
      Z64 (*bt)[8] = s.b[b & 1];
      __m512 sc[8];
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) sc[j] = j % 2 == 0 ? scale_floats(blk, j) : scale_floats_x16(blk, j);
      __m512i mn[4];
#pragma GCC unroll 4
      for (int i = 0; i < 4; ++i) mn[i] = min_pairs(blk, i);
      const __m512 d = halves(blk + L::kDAt), dmin = halves(blk + L::kDminAt);
      const XSums* bs = sums + b * kTok;
      for (int64_t c0 = 0; c0 < tc; c0 += kChunk) {
        const int cn = static_cast<int>(tc - c0 < kChunk ? tc - c0 : kChunk);
        const uint8_t* xq = xt + c0 * x_stride + b * sizeof(BlockQ8_K) + kXQs;
        // Alternate B tiles, so a sub-block's load need not wait for the last one's dots.
#pragma GCC unroll 4
        for (int j = 0; j < 8; j += 2) {
          PAGODA_SUB_BLOCK_DOTS(PAGODA_TILE_DPBSUD, PAGODA_TMM_B0, bt[j][0].b, xq + 32 * j, x_stride, cn, s.c[j]);
          PAGODA_SUB_BLOCK_DOTS(PAGODA_TILE_DPBSUD, PAGODA_TMM_B1, bt[j + 1][0].b, xq + 32 * (j + 1), x_stride, cn,
                                s.c[j + 1]);
        }
        for (int t = 0; t < cn; ++t) {
          __m512 isum = _mm512_setzero_ps();
#pragma GCC unroll 8
          for (int j = 0; j < 8; ++j)
            isum = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(s.c[j][t].b)), sc[j], isum);
          const XSums& xs = bs[c0 + t];
          __m512i msum = _mm512_setzero_si512();
#pragma GCC unroll 4
          for (int i = 0; i < 4; ++i) msum = _mm512_dpwssd_epi32(msum, mn[i], _mm512_set1_epi32(xs.pairs[i]));
          const __m512 dx = _mm512_set1_ps(xs.d);
          float* a = reinterpret_cast<float*>(s.acc[c0 + t].b);
          __m512 acc = _mm512_load_ps(a);
          acc = _mm512_fmadd_ps(isum, _mm512_mul_ps(d, dx), acc);
          acc = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(msum), _mm512_mul_ps(dmin, dx), acc);
          _mm512_store_ps(a, acc);
        }
      }
    }
  };
  amx_tile_loop<32>(panels, static_cast<size_t>(nb) * L::kBlockBytes, rows, x, x_stride, tokens, y, y_stride, s.acc,
                    stage, run_panel);
}

}  // namespace

// Replaces the tile of k (the VNNI bodies, already registered), which stays the body
// for calls of fewer than kMinTokens tokens.
void register_packed_k4_amx(PackedKernels& k) {
  g_vnni_tile = k.tile;
  k.tile = tile;
}

}  // namespace pagoda::simd

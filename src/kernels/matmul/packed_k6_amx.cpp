// amx body of the packed Q6_K tile (packed_weights.h; layout in packed_layout.h,
// K6Layout). Compiled for AVX-512 VNNI + AMX-INT8 and called only where
// cpu_features().amx_int8 holds; internal linkage throughout.
//
// As the Q4_K one (packed_k4_amx.cpp): a super-block's 6-bit levels are built once per
// panel as the VNNI body builds them (ql nibble | qh field), less 32, so they are the
// signed quants q and tdpbssd needs no offset term; sub-block j (16 values) is then a
// 4 x 64-byte B tile, and one tile dot gives its sum(q * x) for 16 tokens, the same integer
// as the VNNI body's (which starts each dot from -32 * sum(x) over unsigned levels). Per
// token those dots times the sub-block scales are summed by FMA in the VNNI body's order
// (kSubBlockOrder) and the one FMA per super-block is the same, so every output equals
// the GEMV's bit for bit.
#include "kernels/simd/simd_intrinsics.h"

#include "kernels/matmul/packed_amx_driver.h"
#include "kernels/matmul/packed_k6_body.h"
#include "kernels/matmul/packed_layout.h"
#include "kernels/matmul/packed_weights.h"
#include "kernels/simd/amx_common.h"
#include "kernels/simd/avx512_common.h"
#include "kernels/simd/tile_buffer.h"
#include "quant/blocks.h"

namespace pagoda::simd {
namespace {

constexpr int kTok = kAmxTok;
constexpr int kChunk = 32;  // tokens whose C tiles are held at once: 16 x 32 x 64 B in L1
// Below this many tokens the VNNI tile is as fast (bench/micro packed_tile_{vnni,amx}).
constexpr int64_t kMinTokens = 12;

PackedTileFn g_vnni_tile = nullptr;  // the body below kMinTokens

struct alignas(64) Scratch {
  Z64 b[2][16][4];   // sub-block j's B tile (4 rows of 16 x 4 quants), two blocks' worth
  Z64 c[16][kChunk];  // sub-block j's dots, a token per line
  Z64 acc[kTok];      // the panel's FP32 accumulators, a token per line
};
thread_local Scratch t_scratch;
thread_local TileBuffer<float> t_dx;

// Block blk's quants q = u - 32 into its sixteen B tiles: ql register group s of half n
// holds, in its low nibbles, sub-block 8n + 2s + kh (registers k = 4kh .. 4kh + 3, one
// tile row each) and in its high nibbles sub-block 8n + 2s + 4 + kh.
template <int kN, int kS>
inline void unpack_group(const uint8_t* blk, Z64 (*out)[4]) {
  const __m512i lo4 = _mm512_set1_epi8(0x0f), m30 = _mm512_set1_epi8(0x30), k32 = _mm512_set1_epi8(32);
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k) {
    const __m512i q = _mm512_loadu_si512(blk + L::ql_at(kN, kS, k));
    const __m512i h = _mm512_loadu_si512(blk + L::qh_at(kN, k));
    const __m512i ul = levels(_mm512_and_si512(q, lo4), high_field<kS, 0>(h), m30);
    const __m512i uh = levels(_mm512_and_si512(_mm512_srli_epi16(q, 4), lo4), high_field<kS, 1>(h), m30);
    const int sub = 8 * kN + 2 * kS + k / 4;
    _mm512_store_si512(out[sub][k % 4].b, _mm512_sub_epi8(ul, k32));
    _mm512_store_si512(out[sub + 4][k % 4].b, _mm512_sub_epi8(uh, k32));
  }
}
inline void unpack(const uint8_t* blk, Z64 (*out)[4]) {
  unpack_group<0, 0>(blk, out);
  unpack_group<0, 1>(blk, out);
  unpack_group<1, 0>(blk, out);
  unpack_group<1, 1>(blk, out);
}

void tile(int64_t n, const uint8_t* panels, int64_t rows, const uint8_t* x, size_t x_stride, int64_t tokens, float* y,
          size_t y_stride) {
  if (tokens < kMinTokens) {
    g_vnni_tile(n, panels, rows, x, x_stride, tokens, y, y_stride);
    return;
  }
  const int64_t nb = n / kQK_K;
  float* dxs = t_dx.get(static_cast<size_t>(nb) * kTok);
  Scratch& s = t_scratch;
  auto stage = [&](const uint8_t* xt, int64_t tc) {
    for (int64_t t = 0; t < tc; ++t)
      for (int64_t b = 0; b < nb; ++b) std::memcpy(&dxs[b * kTok + t], xt + t * x_stride + b * sizeof(BlockQ8_K), 4);
  };
  auto run_panel = [&](const uint8_t* panel, bool prefetch_next, const uint8_t* xt, int64_t tc) {
    const size_t panel_bytes = packed::panel_bytes<L>(nb);
    unpack(panel + packed::block_at<L>(0), s.b[0]);
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* blk = panel + packed::block_at<L>(b);
      if (prefetch_next) prefetch_block<_MM_HINT_T1>(blk + panel_bytes, L::kBlockBytes);
      // The next block's quants are unpacked before this block's tiles load theirs: a
      // tile load right after the stores that wrote its bytes waits for them.
      if (b + 1 < nb) unpack(panel + packed::block_at<L>(b + 1), s.b[(b + 1) & 1]);
      Z64 (*bt)[4] = s.b[b & 1];
      const __m512 d =
          _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(panel + packed::scales_at<L>(b))));
      for (int64_t c0 = 0; c0 < tc; c0 += kChunk) {
        const int cn = static_cast<int>(tc - c0 < kChunk ? tc - c0 : kChunk);
        const uint8_t* xq = xt + c0 * x_stride + b * sizeof(BlockQ8_K) + kXQs;
#pragma GCC unroll 8
        for (int j = 0; j < 16; j += 2) {
          PAGODA_SUB_BLOCK_DOTS(PAGODA_TILE_DPBSSD, PAGODA_TMM_B0, bt[j][0].b, xq + 16 * j, x_stride, cn, s.c[j]);
          PAGODA_SUB_BLOCK_DOTS(PAGODA_TILE_DPBSSD, PAGODA_TMM_B1, bt[j + 1][0].b, xq + 16 * (j + 1), x_stride, cn,
                                s.c[j + 1]);
        }
        __m512 sc[16];
#pragma GCC unroll 16
        for (int j = 0; j < 16; ++j) sc[j] = scale_floats(blk, j);
        for (int t = 0; t < cn; ++t) {
          __m512 isum = _mm512_setzero_ps();
#pragma GCC unroll 16
          for (int i = 0; i < 16; ++i) {
            const int j = kSubBlockOrder[i];
            isum = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(s.c[j][t].b)), sc[j], isum);
          }
          float* a = reinterpret_cast<float*>(s.acc[c0 + t].b);
          _mm512_store_ps(a, _mm512_fmadd_ps(isum,
                                             _mm512_mul_ps(d, _mm512_set1_ps(dxs[b * kTok + c0 + t])),
                                             _mm512_load_ps(a)));
        }
      }
    }
  };
  amx_tile_loop<16>(panels, packed::panel_bytes<L>(nb), rows, x, x_stride, tokens, y, y_stride, s.acc, stage,
                    run_panel);
}

}  // namespace

// Replaces the tile of k (the VNNI bodies, already registered), which stays the body
// for calls of fewer than kMinTokens tokens.
void register_packed_k6_amx(PackedKernels& k) {
  g_vnni_tile = k.tile;
  k.tile = tile;
}

}  // namespace pagoda::simd

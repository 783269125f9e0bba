// Internal: the legacy formats' tile (prefill GEMM) driver, shared by legacy_avx2.cpp and
// legacy_avx512.cpp, which include it and pass their target T. The driver stages up to
// kTileTokens activation rows block-major, walks the weights in panels of T::kRows rows
// (repacked by T::repack, rows in lanes) and hands each panel and the staged tokens to
// T::micro_tokens; the repack and the micro-kernels are the target's own (AVX2's
// maddubs / sign trick and AVX-512's dpbusd differ in layout as well as instructions).
// Include after kernels/simd/simd_intrinsics.h (its byte loads); everything has internal
// linkage.
//
// T provides: Reg (one register of bytes, the scratch unit), kRows, kFlip<B> (whether
// the staged quants are x + 128), panel_regs<B>(), dot<B>, repack<B>(w, ws, valid, nb,
// panel, next, next_rows) (next: the following panel's rows, for a prefetch; nullptr at
// the end) and micro_tokens<B>(nb, panel, stage, tokens, y, ys, valid).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/matmul/legacy_layout.h"
#include "kernels/simd/tile_buffer.h"

namespace pagoda::simd {
namespace {

namespace legacy_tile {

constexpr int kTok = legacy::kTileTokens;
constexpr int kXStride = kTok * 32;  // bytes of staged quants per block

// Staged activations of up to kTok tokens, block-major so a micro-kernel reaches token t
// of block b at a constant offset: q[b][t] = x + 128 (or x itself where the target's
// products take the sign trick: 32 bytes), d[b][t] = fp32 scale, s[b][t] = d * sum(x)
// (only for formats with a min).
struct XStage {
  uint8_t* q;
  float* d;
  float* s;
};

template <bool kFlip, bool kMin>
void stage_x(const uint8_t* x, size_t x_stride, int64_t tokens, int64_t nb, const XStage& st) {
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
  for (int64_t t = 0; t < tokens; ++t) {
    const uint8_t* row = x + t * x_stride;
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* blk = row + b * legacy::kXBytes;
      const __m256i raw = load256(blk + legacy::kXQs);
      const __m256i u = _mm256_xor_si256(raw, flip);
      _mm256_store_si256(reinterpret_cast<__m256i*>(st.q + b * kXStride + t * 32), kFlip ? u : raw);
      const float dx = half(blk);
      st.d[b * kTok + t] = dx;
      if constexpr (kMin) {
        const __m256i s = _mm256_sad_epu8(u, _mm256_setzero_si256());
        const __m128i s2 = _mm_add_epi64(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
        const int64_t sum = _mm_cvtsi128_si64(s2) + _mm_extract_epi64(s2, 1) - 32 * 128;
        st.s[b * kTok + t] = dx * static_cast<float>(sum);
      }
    }
  }
}

// With a single token repacking costs about as much as the dots it feeds: dot instead.
constexpr int64_t kMinTileTokens = 2;

template <class T>
struct Scratch {
  static inline thread_local TileBuffer<typename T::Reg> x;
  static inline thread_local TileBuffer<typename T::Reg> w;
};

template <class T, typename B>
void tile(int64_t n, const uint8_t* w, size_t w_stride, int64_t rows, const uint8_t* x, size_t x_stride, int64_t tokens,
          float* y, size_t y_stride) {
  using L = legacy::Layout<B>;
  if (tokens < kMinTileTokens) {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t t = 0; t < tokens; ++t) y[t * y_stride + r] = T::template dot<B>(n, w + r * w_stride, x + t * x_stride);
    return;
  }
  constexpr int64_t kRegBytes = sizeof(typename T::Reg);
  constexpr int64_t kRows = T::kRows;
  const int64_t nb = n / kQK;
  // Staged activations: quants (kXStride bytes per block), then d and s (kTok floats each).
  const size_t xq_regs = static_cast<size_t>(nb * kXStride / kRegBytes);
  const size_t xf_regs = static_cast<size_t>(nb * kTok * 4 / kRegBytes);
  typename T::Reg* xbuf = Scratch<T>::x.get(xq_regs + 2 * xf_regs);
  const XStage st{xbuf[0].b, reinterpret_cast<float*>(xbuf + xq_regs),
                  reinterpret_cast<float*>(xbuf + xq_regs + xf_regs)};
  typename T::Reg* panel = Scratch<T>::w.get(static_cast<size_t>(nb) * T::template panel_regs<B>());
  for (int64_t t0 = 0; t0 < tokens; t0 += kTok) {
    const int64_t tc = min64(kTok, tokens - t0);
    stage_x<T::template kFlip<B>, L::kMin>(x + t0 * x_stride, x_stride, tc, nb, st);
    float* yt = y + t0 * y_stride;
    for (int64_t r0 = 0; r0 < rows; r0 += kRows) {
      const int64_t valid = min64(rows - r0, kRows);
      const int64_t left = rows - r0 - kRows;  // rows after this panel
      const uint8_t* next = left > 0 ? w + (r0 + kRows) * w_stride : nullptr;
      T::template repack<B>(w + r0 * w_stride, w_stride, valid, nb, panel, next, left > 0 ? min64(left, kRows) : 0);
      T::template micro_tokens<B>(nb, panel, st, tc, yt + r0, y_stride, valid);
    }
  }
}

}  // namespace legacy_tile

}  // namespace
}  // namespace pagoda::simd

// AVX-512 packer of the Q8_0 and Q4_0 panels (packed_layout.h): the same bytes as the
// scalar packer, written a 16 x 16 dword transpose at a time instead of a byte at a time.
// Per panel and per run of 16 dwords of each row (two Q8_0 blocks, four Q4_0 blocks), the
// 16 rows' dwords are loaded into 16 registers (row r: its blocks' quants, XORed with the
// layout's flip), transposed (lane r of register j = dword j of row r) and stored as the
// blocks' registers; the scales are copied per row. It matters where packing is on a hot
// path: the 2:4 sparse formats' prefill expands and packs a thread's rows on every matmul
// (matmul.cpp), and every model load packs all its matrices.
//
// Internal linkage except the entry point; no std:: templates over shared types.
#include "kernels/simd/simd_intrinsics.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/matmul/packed_layout.h"
#include "kernels/matmul/packed_pack.h"
#include "kernels/matmul/packed_weights.h"
#include "kernels/simd/transpose_avx512.h"
#include "quant/blocks.h"

namespace pagoda::simd {
namespace {

template <typename B>
void pack(const uint8_t* w, size_t ws, int64_t rows, int64_t cols, int64_t p0, int64_t p1, uint8_t* out) {
  using L = packed::Layout<B>;
  constexpr int kGroup = 16 / L::kRegs;  // blocks per 16 dwords of a row
  const int64_t nb = cols / kQK;
  const size_t panel_bytes = packed::panel_bytes<L>(nb);
  for (int64_t p = p0; p < p1; ++p) {
    uint8_t* panel = out + static_cast<size_t>(p) * panel_bytes;
    const int64_t live = std::min<int64_t>(kPanelRows, rows - p * kPanelRows);
    for (int64_t b0 = 0; b0 < nb; b0 += kGroup) {
      const int group = static_cast<int>(std::min<int64_t>(kGroup, nb - b0));
      __m512i v[16];
      for (int r = 0; r < 16; ++r) {
        v[r] = _mm512_setzero_si512();
        if (r >= live) continue;  // rows past the matrix stay zero, as the scalar packer leaves them
        const auto* blk = reinterpret_cast<const B*>(w + static_cast<size_t>(p * kPanelRows + r) * ws) + b0;
        // Block g's quants at dwords kRegs g.. (a missing block's stay zero, unflipped).
        const __m512i flip = _mm512_set1_epi8(static_cast<char>(L::kFlip));
        for (int g = 0; g < group; ++g) {
          const __mmask16 at = static_cast<__mmask16>(((1u << L::kRegs) - 1) << (L::kRegs * g));
          // A masked load whose lanes kRegs g.. read the block's quants (the other lanes
          // read nothing, so the base address before them never faults).
          const auto base = reinterpret_cast<uintptr_t>(blk[g].qs) - 4 * static_cast<uintptr_t>(L::kRegs * g);
          v[r] = _mm512_mask_xor_epi32(v[r], at, _mm512_maskz_loadu_epi32(at, reinterpret_cast<const void*>(base)), flip);
        }
      }
      transpose16_dwords(v);
      for (int g = 0; g < group; ++g) {
        uint8_t* dst = panel + packed::block_at<L>(b0 + g);
        for (int j = 0; j < L::kRegs; ++j)
          _mm512_storeu_si512(dst + 64 * j, v[L::kRegs * g + j]);
        uint8_t* scales = dst + L::kScaleAt;
        for (int r = 0; r < 16; ++r) {
          uint16_t d = 0;
          if (r < live)
            std::memcpy(&d, &reinterpret_cast<const B*>(w + static_cast<size_t>(p * kPanelRows + r) * ws)[b0 + g].d, 2);
          std::memcpy(scales + 2 * r, &d, 2);
        }
      }
    }
  }
}

}  // namespace

bool pack_legacy_avx512(DType t, const uint8_t* w, size_t w_stride, int64_t rows, int64_t cols, int64_t p0, int64_t p1,
                        uint8_t* out) {
  if (t == DType::Q8_0) pack<BlockQ8_0>(w, w_stride, rows, cols, p0, p1, out);
  else if (t == DType::Q4_0) pack<BlockQ4_0>(w, w_stride, rows, cols, p0, p1, out);
  else return false;
  return true;
}

}  // namespace pagoda::simd

// Internal: what the packed Q6_K bodies (packed_k6_avx512.cpp, packed_k6_amx.cpp) share:
// a K6Layout block's scales in lanes and its 6-bit levels from a ql and a qh register.
// Include only from files compiled for AVX-512 (*_avx512.cpp, *_amx.cpp): internal
// linkage, one copy per including file.
#pragma once

#include "kernels/matmul/packed_layout.h"
#include "kernels/simd/avx512_common.h"
#include "quant/blocks.h"

namespace pagoda::simd {
namespace {

using L = packed::K6Layout;

constexpr size_t kXQs = offsetof(BlockQ8_K, qs);

inline __m512i scale_lanes(const uint8_t* blk, int j) {
  return _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + L::kScalesAt + 16 * j)));
}

inline __m512 scale_floats(const uint8_t* blk, int j) { return _mm512_cvtepi32_ps(scale_lanes(blk, j)); }

// The order the bodies sum a super-block's sixteen scaled sub-block dots in (the VNNI
// body's: register group by group, each group's low-nibble sub-block before its high).
inline constexpr int kSubBlockOrder[16] = {0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15};

// The qh field completing nibble half h of ql register group s, moved to bits 4-5 (the
// other bits are masked by the caller's ternlog). qh byte bits: 0-1 (s 0, h 0), 2-3
// (s 1, h 0), 4-5 (s 0, h 1), 6-7 (s 1, h 1).
template <int kS, int kH>
inline __m512i high_field(__m512i h) {
  constexpr int kShift = 4 - 2 * (kS + 2 * kH);
  if constexpr (kShift > 0) return _mm512_slli_epi16(h, kShift);
  if constexpr (kShift < 0) return _mm512_srli_epi16(h, -kShift);
  return h;
}

// nib | (field & 0x30): nib has only bits 0-3 set.
inline __m512i levels(__m512i nib, __m512i field, __m512i m30) { return _mm512_ternarylogic_epi32(nib, field, m30, 0xF8); }

}  // namespace
}  // namespace pagoda::simd

// Internal: a 16 x 16 transpose of dwords in AVX-512 registers, for the code that writes
// packed panels (kernels/matmul/packed_layout.h: lane r of a panel register holds four
// bytes of row r). Include only from files compiled for AVX-512; internal linkage, so no
// copy of it can be linked into code that runs on other CPUs. 64 shuffles per 1 KiB.
#pragma once

#include <immintrin.h>

namespace pagoda::simd {
namespace {

// v[j] := the register whose lane r is dword j of v[r].
[[maybe_unused]] inline void transpose16_dwords(__m512i v[16]) {
  __m512i a[16], b[16];
  for (int i = 0; i < 8; ++i) {
    a[2 * i] = _mm512_unpacklo_epi32(v[2 * i], v[2 * i + 1]);
    a[2 * i + 1] = _mm512_unpackhi_epi32(v[2 * i], v[2 * i + 1]);
  }
  // b[4i + c], 128-bit lane L: dword 4L + c of rows 4i..4i+3.
  for (int i = 0; i < 4; ++i) {
    b[4 * i + 0] = _mm512_unpacklo_epi64(a[4 * i], a[4 * i + 2]);
    b[4 * i + 1] = _mm512_unpackhi_epi64(a[4 * i], a[4 * i + 2]);
    b[4 * i + 2] = _mm512_unpacklo_epi64(a[4 * i + 1], a[4 * i + 3]);
    b[4 * i + 3] = _mm512_unpackhi_epi64(a[4 * i + 1], a[4 * i + 3]);
  }
  // Dword 4L + c of all rows: lane L of b[c], b[4 + c], b[8 + c], b[12 + c].
  for (int c = 0; c < 4; ++c) {
    const __m512i s0 = _mm512_shuffle_i32x4(b[c], b[4 + c], 0x44);
    const __m512i s1 = _mm512_shuffle_i32x4(b[c], b[4 + c], 0xee);
    const __m512i s2 = _mm512_shuffle_i32x4(b[8 + c], b[12 + c], 0x44);
    const __m512i s3 = _mm512_shuffle_i32x4(b[8 + c], b[12 + c], 0xee);
    v[c] = _mm512_shuffle_i32x4(s0, s2, 0x88);
    v[4 + c] = _mm512_shuffle_i32x4(s0, s2, 0xdd);
    v[8 + c] = _mm512_shuffle_i32x4(s1, s3, 0x88);
    v[12 + c] = _mm512_shuffle_i32x4(s1, s3, 0xdd);
  }
}

}  // namespace
}  // namespace pagoda::simd

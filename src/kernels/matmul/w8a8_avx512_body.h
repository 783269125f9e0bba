// Internal: the AVX-512 bodies of the W8A8 kernels (w8a8_kernels.h), written once over
// `kVnni` and included by w8a8_avx512.cpp (vpdpbusd) and w8a8_avx512bw.cpp (no VNNI:
// pmaddubsw + pmaddwd), each compiled for its own instruction set. Everything lands in an
// anonymous namespace and calls no inline function or std:: template from a shared header,
// so no AVX-512 copy of a function can be picked by the linker for code that runs on
// other CPUs.
//
// gemv (decode, bound by reading the weights): four rows at a time share each 64-byte
// activation load; one int32 accumulator per row over the whole row, reduced once.
//
// tile (prefill, compute bound): rows in lanes, as the legacy Q8_0 tile
// (legacy_avx512.cpp). Sixteen weight rows are transposed into registers whose lane r
// holds 4 consecutive quants of row r ("a panel"), once per call and 256 tokens; each
// activation dword is broadcast to all lanes, so one vpdpbusd does 64 multiply-adds for
// 16 rows. A register block of 2 panels x 8 tokens reuses every weight load 8 times and
// every broadcast twice, in 16 independent accumulator chains (12 tokens measured no
// faster). Unlike Q8_0 there is no per-block float work: a row's sum stays in int32 until
// the end, then one convert and one multiply per output. The activations come staged in
// blocks of 8 tokens (w8a8_stage_block, once per matmul for all threads), so a step's 8
// broadcasts sit side by side. Without VNNI each 4-byte product is abs + mask-negate +
// pmaddubsw + pmaddwd + add.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/matmul/legacy_layout.h"
#include "kernels/matmul/w8a8_kernels.h"
#include "kernels/matmul/w8a8_tile_common.h"
#include "quant/w8a8.h"

namespace pagoda::simd {
namespace {

// The first k (clamped to 0..16 / 0..64) lanes.
inline __mmask16 mask16(int64_t k) {
  return k >= 16 ? static_cast<__mmask16>(0xFFFF) : k <= 0 ? 0 : static_cast<__mmask16>((1u << k) - 1);
}
inline __mmask64 mask64(int64_t k) { return k >= 64 ? ~0ull : k <= 0 ? 0 : (1ull << k) - 1; }

// ---------------------------------------------------------------- activations

// quantize_activation_w8a8 bit for bit: amax ignores NaN (vmaxps returns its second
// operand when either is NaN, like the scalar `a > amax`), the rounding is nearest_int's
// (clamp, add 1.5 * 2^23, keep the mantissa bits), then the clamp to +-127.
float quantize_x(const float* src, int64_t n, int8_t* q, int32_t* sum) {
  __m512 m = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16)
    m = _mm512_max_ps(_mm512_abs_ps(_mm512_maskz_loadu_ps(mask16(n - i), src + i)), m);
  const float amax = _mm512_reduce_max_ps(m);
  const __m512 id = _mm512_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);
  const __m512 lim = _mm512_set1_ps(legacy::kRoundLimit);
  const __m512 nlim = _mm512_set1_ps(-legacy::kRoundLimit);
  const __m512 magic = _mm512_set1_ps(legacy::kRoundMagic);
  const __m512i mant = _mm512_set1_epi32(0x007fffff);
  const __m512i bias = _mm512_set1_epi32(0x00400000);
  const __m512i hi = _mm512_set1_epi32(127);
  const __m512i lo = _mm512_set1_epi32(-127);
  __m512i s = _mm512_setzero_si512();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = mask16(n - i);
    // min(lim, v) / max(-lim, v) keep a NaN v, as the scalar ternaries do.
    __m512 f = _mm512_max_ps(nlim, _mm512_min_ps(lim, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, src + i), id)));
    f = _mm512_add_ps(f, magic);
    __m512i v = _mm512_sub_epi32(_mm512_and_si512(_mm512_castps_si512(f), mant), bias);
    v = _mm512_maskz_mov_epi32(k, _mm512_max_epi32(lo, _mm512_min_epi32(hi, v)));
    s = _mm512_add_epi32(s, v);
    _mm512_mask_cvtepi32_storeu_epi8(q + i, k, v);
  }
  std::memset(q + n, 0, w8a8_act_stride(n) - static_cast<size_t>(n));
  *sum = _mm512_reduce_add_epi32(s);
  return amax / 127.0f;
}

// ---------------------------------------------------------------- products

// acc + the dot of each lane's 4 weight bytes with its 4 activation bytes. VNNI: w is
// already offset (w ^ 0x80, unsigned) and the caller takes 128 * sum(x) back out.
// Without: w signed; |w| times x carrying w's sign, never saturating (|w| <= 128, |x| <= 127).
template <bool kVnni>
inline __m512i dot4(__m512i acc, __m512i w, __m512i x) {
  if constexpr (kVnni) {
#if defined(__GNUC__) && !defined(__clang__)
    // GCC 12 copies a vpdpbusd accumulator in and out of another register at every step
    // of a loop that carries it (two extra moves per product in the tile's inner loop,
    // and spills with 24 accumulators: a third of the speed). The bare instruction with
    // its accumulator tied as an in-out operand keeps each one in its register.
    asm("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(w), "v"(x));
    return acc;
#else
    return _mm512_dpbusd_epi32(acc, w, x);
#endif
  } else {
    const __m512i sx = _mm512_mask_sub_epi8(x, _mm512_movepi8_mask(w), _mm512_setzero_si512(), x);
    const __m512i p = _mm512_maddubs_epi16(_mm512_abs_epi8(w), sx);
    return _mm512_add_epi32(acc, _mm512_madd_epi16(p, _mm512_set1_epi16(1)));
  }
}

// The weights as dot4 takes them.
template <bool kVnni>
inline __m512i prep(__m512i w) {
  if constexpr (kVnni) return _mm512_xor_si512(w, _mm512_set1_epi8(static_cast<char>(0x80)));
  else return w;
}

inline float scaled(int32_t isum, float ws, float xs) { return static_cast<float>(isum) * (ws * xs); }

// ---------------------------------------------------------------- gemv

template <bool kVnni>
void gemv(int64_t n, const int8_t* w, size_t w_stride, const float* w_scale, int64_t rows, const W8A8Acts& x,
          float* y) {
  const int64_t full = n & ~int64_t{63};
  const __mmask64 tail = mask64(n - full);
  // The offset's share sits in lane 0 from the start; int32 lanes wrap, only the final
  // sum must fit (n <= kW8A8MaxCols).
  const __m512i init = _mm512_maskz_set1_epi32(1, kVnni ? -128 * x.sum[0] : 0);
  const float xs = x.scale[0];
  int64_t r = 0;
  for (; r + 4 <= rows; r += 4) {
    const int8_t* w0 = w + r * w_stride;
    const int8_t* w1 = w0 + w_stride;
    const int8_t* w2 = w1 + w_stride;
    const int8_t* w3 = w2 + w_stride;
    __m512i a0 = init, a1 = init, a2 = init, a3 = init;
    for (int64_t i = 0; i < full; i += 64) {
      const __m512i xv = _mm512_loadu_si512(x.q + i);
      a0 = dot4<kVnni>(a0, prep<kVnni>(_mm512_loadu_si512(w0 + i)), xv);
      a1 = dot4<kVnni>(a1, prep<kVnni>(_mm512_loadu_si512(w1 + i)), xv);
      a2 = dot4<kVnni>(a2, prep<kVnni>(_mm512_loadu_si512(w2 + i)), xv);
      a3 = dot4<kVnni>(a3, prep<kVnni>(_mm512_loadu_si512(w3 + i)), xv);
    }
    if (full < n) {
      // The activation row is zero-padded to 64 bytes, which cancels the masked weights'
      // offset too.
      const __m512i xv = _mm512_loadu_si512(x.q + full);
      a0 = dot4<kVnni>(a0, prep<kVnni>(_mm512_maskz_loadu_epi8(tail, w0 + full)), xv);
      a1 = dot4<kVnni>(a1, prep<kVnni>(_mm512_maskz_loadu_epi8(tail, w1 + full)), xv);
      a2 = dot4<kVnni>(a2, prep<kVnni>(_mm512_maskz_loadu_epi8(tail, w2 + full)), xv);
      a3 = dot4<kVnni>(a3, prep<kVnni>(_mm512_maskz_loadu_epi8(tail, w3 + full)), xv);
    }
    y[r] = scaled(_mm512_reduce_add_epi32(a0), w_scale[r], xs);
    y[r + 1] = scaled(_mm512_reduce_add_epi32(a1), w_scale[r + 1], xs);
    y[r + 2] = scaled(_mm512_reduce_add_epi32(a2), w_scale[r + 2], xs);
    y[r + 3] = scaled(_mm512_reduce_add_epi32(a3), w_scale[r + 3], xs);
  }
  for (; r < rows; ++r) {
    const int8_t* w0 = w + r * w_stride;
    __m512i a0 = init;
    for (int64_t i = 0; i < full; i += 64)
      a0 = dot4<kVnni>(a0, prep<kVnni>(_mm512_loadu_si512(w0 + i)), _mm512_loadu_si512(x.q + i));
    if (full < n)
      a0 = dot4<kVnni>(a0, prep<kVnni>(_mm512_maskz_loadu_epi8(tail, w0 + full)), _mm512_loadu_si512(x.q + full));
    y[r] = scaled(_mm512_reduce_add_epi32(a0), w_scale[r], xs);
  }
}

// ---------------------------------------------------------------- tile

thread_local Buffer t_panels;

// Repacks rows [0, valid) of w (row stride ws) into nj = 4 * ceil(n / 16) registers: lane
// r of register j = bytes 4j..4j+3 of row r, prepared for dot4. Rows past `valid` repeat
// the last row and bytes past n are zero (their outputs are never stored; zero weights
// meet zero activation padding). The `next_rows` rows at `next` (the following panel)
// are prefetched alongside, so they arrive while this one is multiplied.
template <bool kVnni>
void repack(const int8_t* w, size_t ws, int64_t valid, int64_t n, __m512i* out, const int8_t* next,
            int64_t next_rows) {
  const int8_t* rp[16];
  for (int r = 0; r < 16; ++r) rp[r] = w + (r < valid ? r : valid - 1) * ws;
  for (int64_t at = 0; at < n; at += 16, out += 4) {
    if (next != nullptr && (at & 63) == 0)
      for (int64_t r = 0; r < next_rows; ++r) _mm_prefetch(reinterpret_cast<const char*>(next + r * ws + at), _MM_HINT_T1);
    const __mmask16 k = mask16(n - at);
    // 16 rows x 4 dwords -> 4 registers of one dword from each row, lanes in row order.
    __m512i z[4];
    for (int g = 0; g < 4; ++g) {
      __m512i v = _mm512_castsi128_si512(_mm_maskz_loadu_epi8(k, rp[g] + at));
      v = _mm512_inserti32x4(v, _mm_maskz_loadu_epi8(k, rp[g + 4] + at), 1);
      v = _mm512_inserti32x4(v, _mm_maskz_loadu_epi8(k, rp[g + 8] + at), 2);
      z[g] = _mm512_inserti32x4(v, _mm_maskz_loadu_epi8(k, rp[g + 12] + at), 3);
    }
    const __m512i a0 = _mm512_unpacklo_epi32(z[0], z[1]);
    const __m512i a1 = _mm512_unpackhi_epi32(z[0], z[1]);
    const __m512i a2 = _mm512_unpacklo_epi32(z[2], z[3]);
    const __m512i a3 = _mm512_unpackhi_epi32(z[2], z[3]);
    _mm512_store_si512(out + 0, prep<kVnni>(_mm512_unpacklo_epi64(a0, a2)));
    _mm512_store_si512(out + 1, prep<kVnni>(_mm512_unpackhi_epi64(a0, a2)));
    _mm512_store_si512(out + 2, prep<kVnni>(_mm512_unpacklo_epi64(a1, a3)));
    _mm512_store_si512(out + 3, prep<kVnni>(_mm512_unpackhi_epi64(a1, a3)));
  }
}

// kP panels of 16 rows (p0, p1; row scales ws0, ws1; v0, v1 rows valid) x one staged
// block of 8 tokens at xd, of which the first `cnt` are stored at y + t * ys (+ 16 for p1).
// Two arrays rather than acc[2][8]: GCC keeps arrays up to 768 bytes in registers.
template <bool kVnni, int kP>
void micro(int64_t nj, const __m512i* p0, const __m512i* p1, const int32_t* xd, const int32_t* corr,
           const float* xscale, int cnt, const float* ws0, const float* ws1, int64_t v0, int64_t v1, float* y,
           size_t ys) {
  __m512i a0[kBlock], a1[kBlock];
#pragma GCC unroll 8
  for (int t = 0; t < kBlock; ++t) {
    a0[t] = kVnni ? _mm512_set1_epi32(corr[t]) : _mm512_setzero_si512();
    a1[t] = a0[t];
  }
  for (int64_t j = 0; j < nj; ++j, xd += kBlock) {
    const __m512i w0 = _mm512_load_si512(p0 + j);
    const __m512i w1 = _mm512_load_si512((kP == 2 ? p1 : p0) + j);
#pragma GCC unroll 8
    for (int t = 0; t < kBlock; ++t) {
      const __m512i b = _mm512_set1_epi32(xd[t]);
      a0[t] = dot4<kVnni>(a0[t], w0, b);
      if constexpr (kP == 2) a1[t] = dot4<kVnni>(a1[t], w1, b);
    }
  }
  const __mmask16 k0 = mask16(v0), k1 = mask16(v1);
  const __m512 s0 = _mm512_maskz_loadu_ps(k0, ws0);
  const __m512 s1 = kP == 2 ? _mm512_maskz_loadu_ps(k1, ws1) : s0;
#pragma GCC unroll 8
  for (int t = 0; t < kBlock; ++t) {
    if (t >= cnt) break;
    const __m512 xs = _mm512_set1_ps(xscale[t]);
    _mm512_mask_storeu_ps(y + t * ys, k0, _mm512_mul_ps(_mm512_cvtepi32_ps(a0[t]), _mm512_mul_ps(s0, xs)));
    if constexpr (kP == 2)
      _mm512_mask_storeu_ps(y + t * ys + 16, k1, _mm512_mul_ps(_mm512_cvtepi32_ps(a1[t]), _mm512_mul_ps(s1, xs)));
  }
}

template <bool kVnni>
void tile(int64_t n, const int8_t* w, size_t w_stride, const float* w_scale, int64_t rows, const W8A8Acts& x,
          int64_t tokens, float* y, size_t y_stride) {
  if (tokens < 2) {
    // With a single token repacking costs about as much as the dots it feeds.
    for (int64_t t = 0; t < tokens; ++t) {
      const W8A8Acts xt{x.q + t * x.stride, x.stride, x.scale + t, x.sum + t, nullptr};
      gemv<kVnni>(n, w, w_stride, w_scale, rows, xt, y + t * y_stride);
    }
    return;
  }
  const int64_t nj = w8a8_staged_dwords(n);
  __m512i* p0 = reinterpret_cast<__m512i*>(t_panels.get(static_cast<size_t>(2 * nj)));
  __m512i* p1 = p0 + nj;
  TokenTerms terms;
  for (int64_t c0 = 0; c0 < tokens; c0 += kChunk) {
    const int64_t tc = min64(kChunk, tokens - c0);
    token_terms(x, c0, tc, terms);
    for (int64_t r0 = 0; r0 < rows; r0 += 32) {
      const int64_t v0 = min64(16, rows - r0), v1 = min64(16, rows - r0 - 16);
      const int64_t nr = r0 + 32;  // the next pair of panels
      const int8_t* next0 = nr < rows ? w + nr * w_stride : nullptr;
      const int8_t* next1 = nr + 16 < rows ? w + (nr + 16) * w_stride : nullptr;
      repack<kVnni>(w + r0 * w_stride, w_stride, v0, n, p0, next0, next0 ? min64(16, rows - nr) : 0);
      if (v1 > 0)
        repack<kVnni>(w + (r0 + 16) * w_stride, w_stride, v1, n, p1, next1, next1 ? min64(16, rows - nr - 16) : 0);
      const float* ws0 = w_scale + r0;
      const float* ws1 = v1 > 0 ? ws0 + 16 : ws0;
      for (int64_t t0 = 0; t0 < tc; t0 += kBlock) {
        const int32_t* xd = x.staged + (c0 + t0) * nj;
        const int cnt = static_cast<int>(min64(kBlock, tc - t0));
        float* yb = y + (c0 + t0) * static_cast<int64_t>(y_stride) + r0;
        if (v1 > 0)
          micro<kVnni, 2>(nj, p0, p1, xd, terms.corr + t0, terms.scale + t0, cnt, ws0, ws1, v0, v1, yb, y_stride);
        else
          micro<kVnni, 1>(nj, p0, p1, xd, terms.corr + t0, terms.scale + t0, cnt, ws0, ws1, v0, v1, yb, y_stride);
      }
    }
  }
}

template <bool kVnni>
void fill(W8A8Kernels& k) {
  k.quantize_x = quantize_x;
  k.gemv = gemv<kVnni>;
  k.tile = tile<kVnni>;
}

}  // namespace
}  // namespace pagoda::simd

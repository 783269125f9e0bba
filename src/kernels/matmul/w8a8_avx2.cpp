// AVX2 bodies of the W8A8 kernels (w8a8_kernels.h). Compiled for AVX2 only and called
// only when the CPU has it; internal linkage throughout, and no inline function or std::
// template from a shared header is used, so nothing here can be linked into other code.
//
// Each 4-byte product is pmaddubsw(|w|, x with w's sign) + pmaddwd + add: exact, since a
// pmaddubsw pair sum is at most 2 * 128 * 127 < 2^15. gemv takes four rows per 32-byte
// activation load; tile puts 8 rows in the lanes of a register (as w8a8_avx512_body.h
// does with 16), in register blocks of 8 rows x one staged block of 8 tokens.
#include "kernels/simd/simd_intrinsics.h"
#include "kernels/simd/vec_avx2.h"

#include "kernels/matmul/legacy_layout.h"
#include "kernels/matmul/w8a8_bodies.h"
#include "kernels/matmul/w8a8_tile_common.h"
#include "quant/w8a8.h"

namespace pagoda::simd {
namespace {

inline int32_t hsum(__m256i v) { return V256::i_hsum(v); }


// All-ones in the first k (<= 8) int32 lanes.
inline __m256i lane_mask(int64_t k) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(min64(k, 8))), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

inline __m256 load_floats(const float* p, int64_t left) {
  return left >= 8 ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, lane_mask(left));
}

// quantize_activation_w8a8 bit for bit (see w8a8_avx512_body.h for the NaN and rounding
// details, which are the same here).
float quantize_x(const float* src, int64_t n, int8_t* q, int32_t* sum) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 m = _mm256_setzero_ps();
  for (int64_t i = 0; i < n; i += 8) m = _mm256_max_ps(_mm256_andnot_ps(sign, load_floats(src + i, n - i)), m);
  const float amax = V256::hmax(m);
  const __m256 id = _mm256_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);
  const __m256 lim = _mm256_set1_ps(legacy::kRoundLimit);
  const __m256 nlim = _mm256_set1_ps(-legacy::kRoundLimit);
  const __m256 magic = _mm256_set1_ps(legacy::kRoundMagic);
  const __m256i mant = _mm256_set1_epi32(0x007fffff);
  const __m256i bias = _mm256_set1_epi32(0x00400000);
  const __m256i hi = _mm256_set1_epi32(127);
  const __m256i lo = _mm256_set1_epi32(-127);
  __m256i s = _mm256_setzero_si256();
  for (int64_t i = 0; i < n; i += 8) {
    __m256 f = _mm256_max_ps(nlim, _mm256_min_ps(lim, _mm256_mul_ps(load_floats(src + i, n - i), id)));
    f = _mm256_add_ps(f, magic);
    __m256i v = _mm256_sub_epi32(_mm256_and_si256(_mm256_castps_si256(f), mant), bias);
    v = _mm256_and_si256(_mm256_max_epi32(lo, _mm256_min_epi32(hi, v)), lane_mask(n - i));
    s = _mm256_add_epi32(s, v);
    const __m128i w16 = _mm_packs_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    const __m128i b8 = _mm_packs_epi16(w16, w16);
    if (n - i >= 8) {
      _mm_storel_epi64(reinterpret_cast<__m128i*>(q + i), b8);
    } else {
      alignas(16) int8_t tmp[16];
      _mm_store_si128(reinterpret_cast<__m128i*>(tmp), b8);
      std::memcpy(q + i, tmp, static_cast<size_t>(n - i));
    }
  }
  std::memset(q + n, 0, w8a8_act_stride(n) - static_cast<size_t>(n));
  *sum = hsum(s);
  return amax / 127.0f;
}

// acc + per int32 lane the dot of 4 signed weight bytes with 4 activation bytes.
inline __m256i dot4(__m256i acc, __m256i w, __m256i x) {
  const __m256i p = _mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(x, w));
  return _mm256_add_epi32(acc, _mm256_madd_epi16(p, _mm256_set1_epi16(1)));
}

inline float scaled(int64_t isum, float ws, float xs) {
  return static_cast<float>(static_cast<int32_t>(isum)) * (ws * xs);
}

// The bytes past the last whole 32 of a row, in integers.
inline int64_t tail_dot(const int8_t* w, const int8_t* x, int64_t from, int64_t n) {
  int64_t s = 0;
  for (int64_t i = from; i < n; ++i) s += static_cast<int32_t>(w[i]) * x[i];
  return s;
}

void gemv(int64_t n, const int8_t* w, size_t w_stride, const float* w_scale, int64_t rows, const W8A8Acts& x,
          float* y) {
  const int64_t full = n & ~int64_t{31};
  const float xs = x.scale[0];
  int64_t r = 0;
  for (; r + 4 <= rows; r += 4) {
    const int8_t* w0 = w + r * w_stride;
    const int8_t* w1 = w0 + w_stride;
    const int8_t* w2 = w1 + w_stride;
    const int8_t* w3 = w2 + w_stride;
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t i = 0; i < full; i += 32) {
      const __m256i xv = load256(x.q + i);
      a0 = dot4(a0, load256(w0 + i), xv);
      a1 = dot4(a1, load256(w1 + i), xv);
      a2 = dot4(a2, load256(w2 + i), xv);
      a3 = dot4(a3, load256(w3 + i), xv);
    }
    y[r] = scaled(hsum(a0) + tail_dot(w0, x.q, full, n), w_scale[r], xs);
    y[r + 1] = scaled(hsum(a1) + tail_dot(w1, x.q, full, n), w_scale[r + 1], xs);
    y[r + 2] = scaled(hsum(a2) + tail_dot(w2, x.q, full, n), w_scale[r + 2], xs);
    y[r + 3] = scaled(hsum(a3) + tail_dot(w3, x.q, full, n), w_scale[r + 3], xs);
  }
  for (; r < rows; ++r) {
    const int8_t* w0 = w + r * w_stride;
    __m256i a0 = _mm256_setzero_si256();
    for (int64_t i = 0; i < full; i += 32) a0 = dot4(a0, load256(w0 + i), load256(x.q + i));
    y[r] = scaled(hsum(a0) + tail_dot(w0, x.q, full, n), w_scale[r], xs);
  }
}

thread_local Buffer t_panel;

// Rows [0, valid) of w into nj registers: lane r of register j = bytes 4j..4j+3 of row r.
// Rows past `valid` repeat the last row, bytes past n are zero (see w8a8_avx512_body.h).
void repack(const int8_t* w, size_t ws, int64_t valid, int64_t n, __m256i* out) {
  const int8_t* rp[8];
  for (int r = 0; r < 8; ++r) rp[r] = w + (r < valid ? r : valid - 1) * ws;
  for (int64_t at = 0; at < n; at += 16, out += 4) {
    __m128i c[8];
    if (at + 16 <= n) {
      for (int r = 0; r < 8; ++r) c[r] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(rp[r] + at));
    } else {
      for (int r = 0; r < 8; ++r) {
        alignas(16) int8_t tmp[16] = {};
        std::memcpy(tmp, rp[r] + at, static_cast<size_t>(n - at));
        c[r] = _mm_load_si128(reinterpret_cast<const __m128i*>(tmp));
      }
    }
    // 128-bit lane L of z[g] holds row g + 4L; the unpacks leave lane r = row r.
    __m256i z[4];
    for (int g = 0; g < 4; ++g) z[g] = _mm256_inserti128_si256(_mm256_castsi128_si256(c[g]), c[g + 4], 1);
    const __m256i a0 = _mm256_unpacklo_epi32(z[0], z[1]);
    const __m256i a1 = _mm256_unpackhi_epi32(z[0], z[1]);
    const __m256i a2 = _mm256_unpacklo_epi32(z[2], z[3]);
    const __m256i a3 = _mm256_unpackhi_epi32(z[2], z[3]);
    _mm256_store_si256(out + 0, _mm256_unpacklo_epi64(a0, a2));
    _mm256_store_si256(out + 1, _mm256_unpackhi_epi64(a0, a2));
    _mm256_store_si256(out + 2, _mm256_unpacklo_epi64(a1, a3));
    _mm256_store_si256(out + 3, _mm256_unpackhi_epi64(a1, a3));
  }
}

// 8 rows (valid of them stored) x one staged block of 8 tokens, the first cnt stored at
// y + t * ys.
void micro(int64_t nj, const __m256i* p, const int32_t* xd, const float* xscale, int cnt, const float* ws,
           int64_t valid, float* y, size_t ys) {
  __m256i acc[kBlock];
#pragma GCC unroll 8
  for (int t = 0; t < kBlock; ++t) acc[t] = _mm256_setzero_si256();
  for (int64_t j = 0; j < nj; ++j, xd += kBlock) {
    const __m256i w = _mm256_load_si256(p + j);
    const __m256i aw = _mm256_abs_epi8(w);
#pragma GCC unroll 8
    for (int t = 0; t < kBlock; ++t) {
      const __m256i pr = _mm256_maddubs_epi16(aw, _mm256_sign_epi8(_mm256_set1_epi32(xd[t]), w));
      acc[t] = _mm256_add_epi32(acc[t], _mm256_madd_epi16(pr, _mm256_set1_epi16(1)));
    }
  }
  const __m256i k = lane_mask(valid);
  const __m256 wsv = _mm256_maskload_ps(ws, k);
#pragma GCC unroll 8
  for (int t = 0; t < kBlock; ++t) {
    if (t >= cnt) break;
    const __m256 v = _mm256_mul_ps(_mm256_cvtepi32_ps(acc[t]), _mm256_mul_ps(wsv, _mm256_set1_ps(xscale[t])));
    if (valid >= 8) _mm256_storeu_ps(y + t * ys, v);
    else _mm256_maskstore_ps(y + t * ys, k, v);
  }
}

void tile(int64_t n, const int8_t* w, size_t w_stride, const float* w_scale, int64_t rows, const W8A8Acts& x,
          int64_t tokens, float* y, size_t y_stride) {
  if (tokens < 2) {
    for (int64_t t = 0; t < tokens; ++t) {
      const W8A8Acts xt{x.q + t * x.stride, x.stride, x.scale + t, x.sum + t, nullptr};
      gemv(n, w, w_stride, w_scale, rows, xt, y + t * y_stride);
    }
    return;
  }
  const int64_t nj = w8a8_staged_dwords(n);
  auto* panel = reinterpret_cast<__m256i*>(t_panel.get(static_cast<size_t>(nj + 1) / 2));
  TokenTerms terms;
  for (int64_t c0 = 0; c0 < tokens; c0 += kChunk) {
    const int64_t tc = min64(kChunk, tokens - c0);
    token_terms(x, c0, tc, terms);
    for (int64_t r0 = 0; r0 < rows; r0 += 8) {
      const int64_t valid = min64(8, rows - r0);
      repack(w + r0 * w_stride, w_stride, valid, n, panel);
      for (int64_t t0 = 0; t0 < tc; t0 += kBlock) {
        const int cnt = static_cast<int>(min64(kBlock, tc - t0));
        micro(nj, panel, x.staged + (c0 + t0) * nj, terms.scale + t0, cnt, w_scale + r0, valid,
              y + (c0 + t0) * static_cast<int64_t>(y_stride) + r0, y_stride);
      }
    }
  }
}

}  // namespace

void w8a8_avx2(W8A8Kernels& k) {
  k.quantize_x = quantize_x;
  k.gemv = gemv;
  k.tile = tile;
}

}  // namespace pagoda::simd

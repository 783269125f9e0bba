// avx2 bodies of the legacy format kernels (see dot_kernels.h, simd_registry.h). This
// file is compiled for avx2 (+FMA, F16C) only and called only when the CPU has it.
//
// Everything here has internal linkage and uses no std:: templates over shared types, so
// no AVX2 copy of an inline function can be picked by the linker for code that runs on
// other CPUs.
//
// Without VNNI the byte products go through maddubs (u8 x s8 -> pairs summed to int16,
// saturating) and pmaddwd against ones (int16 pairs -> int32). Every use below stays in
// int16 range, which the comments next to it argue. Q8_0 weights use the sign trick
// (|w| times x with w's sign), which needs x != -128: activations come from quantize_x,
// whose quants are within -127..127.
//
// dot (decode, GEMV): one block per 256-bit register, four blocks per step with their
// eight FP16 scales converted together.
// tile (prefill): rows in lanes, as the avx512 body: eight weight rows transposed into
// eight registers per block, each activation dword broadcast, an 8 x 6 (rows x tokens)
// register block (8 x 4 for Q8_0, whose sign trick needs more registers).
#include "kernels/simd/simd_intrinsics.h"
#include "kernels/simd/vec_avx2.h"
#include <type_traits>

#include "kernels/matmul/activation_body.h"
#include "kernels/matmul/legacy_layout.h"
#include "kernels/matmul/legacy_tile.h"
#include "kernels/matmul/simd_registry.h"
#include "kernels/simd/tile_buffer.h"
#include "quant/blocks.h"

namespace pagoda::simd {
namespace {

inline float hsum(__m256 v) { return V256::hsum(v); }

using legacy::kXBytes;
using legacy::kXQs;
using legacy::Layout;

struct alignas(32) Y32 {
  uint8_t b[32];
};



// ---------------------------------------------------------------- dot (GEMV)

// A weight block as unsigned bytes u = q + offset in value order (not for Q8_0).
template <typename B>
inline __m256i weights_u(const uint8_t* a) {
  using L = Layout<B>;
  static_assert(L::kBits != 8);
  const __m128i q = load128(a + L::kQs);
  __m256i v = _mm256_inserti128_si256(_mm256_castsi128_si256(q), _mm_srli_epi16(q, 4), 1);
  v = _mm256_and_si256(v, _mm256_set1_epi8(0x0f));
  if constexpr (L::kBits == 5) {
    // Byte i takes bit i of qh: spread each qh byte over 8 lanes, test each lane's bit.
    const __m256i bits = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ULL));
    const __m256i spread = _mm256_setr_epi64x(0, 0x0101010101010101LL, 0x0202020202020202LL, 0x0303030303030303LL);
    const __m256i h = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(load32(a + L::kQh))), spread);
    const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(h, bits), bits);
    v = _mm256_or_si256(v, _mm256_and_si256(set, _mm256_set1_epi8(16)));
  }
  return v;
}

// sum(w * x) of one block in int32 lanes (8 of them).
template <typename B>
inline __m256i block_dot(const uint8_t* a, __m256i xq, __m256i ones16) {
  using L = Layout<B>;
  if constexpr (L::kBits == 8) {
    // |w| <= 128 and |x| <= 127: a pair sums to at most 32512.
    const __m256i w = load256(a + L::kQs);
    const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(xq, w));
    return _mm256_madd_epi16(p, ones16);
  } else {
    // u <= 31: u * x pairs stay within 7874; (u - offset) * x within 4064.
    __m256i p = _mm256_maddubs_epi16(weights_u<B>(a), xq);
    if constexpr (L::kOffset != 0)
      p = _mm256_sub_epi16(p, _mm256_maddubs_epi16(_mm256_set1_epi8(static_cast<char>(L::kOffset)), xq));
    return _mm256_madd_epi16(p, ones16);
  }
}

// The FP16 fields at byte `at` of 4 consecutive blocks of `bytes` bytes, as 4 floats.
inline __m128 half4(const uint8_t* p, int64_t bytes) {
  const __m128i h =
      _mm_setr_epi16(static_cast<short>(load16(p)), static_cast<short>(load16(p + bytes)),
                     static_cast<short>(load16(p + 2 * bytes)), static_cast<short>(load16(p + 3 * bytes)), 0, 0, 0, 0);
  return _mm_cvtph_ps(h);
}

template <typename B>
float dot(int64_t n, const void* wv, const void* xv) {
  using L = Layout<B>;
  constexpr int kB = sizeof(B);
  const auto* w = static_cast<const uint8_t*>(wv);
  const auto* x = static_cast<const uint8_t*>(xv);
  const int64_t nb = n / kQK;
  const __m256i ones16 = _mm256_set1_epi16(1);
  const __m256i ones8 = _mm256_set1_epi8(1);
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  __m256 accm = _mm256_setzero_ps();
  // One block with its scale (and min scale) already broadcast.
  auto step = [&](const uint8_t* wb, const uint8_t* xb, __m256 scale, __m256 mscale, __m256& acc) {
    const __m256i xq = load256(xb + kXQs);
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(block_dot<B>(wb, xq, ones16)), scale, acc);
    if constexpr (L::kMin) {
      const __m256i s = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, xq), ones16);
      accm = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), mscale, accm);
    }
  };
  // Four blocks per step, their 4 + 4 scales converted and multiplied at once.
  int64_t i = 0;
  for (; i + 4 <= nb; i += 4) {
    const uint8_t* wg = w + i * kB;
    const uint8_t* xg = x + i * kXBytes;
    const __m128 dx = half4(xg, kXBytes);
    const __m256 s = _mm256_castps128_ps256(_mm_mul_ps(half4(wg, kB), dx));
    __m256 ms = _mm256_setzero_ps();
    if constexpr (L::kMin) ms = _mm256_castps128_ps256(_mm_mul_ps(half4(wg + L::kM, kB), dx));
    for (int k = 0; k < 4; ++k) {
      const __m256i lane = _mm256_set1_epi32(k);
      step(wg + k * kB, xg + k * kXBytes, _mm256_permutevar8x32_ps(s, lane),
           L::kMin ? _mm256_permutevar8x32_ps(ms, lane) : ms, k % 2 ? acc1 : acc0);
    }
  }
  for (; i < nb; ++i) {
    const uint8_t* wb = w + i * kB;
    const uint8_t* xb = x + i * kXBytes;
    const float dx = half(xb);
    step(wb, xb, _mm256_set1_ps(half(wb) * dx), _mm256_set1_ps(L::kMin ? half(wb + L::kM) * dx : 0.0f), acc0);
  }
  return hsum(_mm256_add_ps(_mm256_add_ps(acc0, acc1), accm));
}

// ---------------------------------------------------------------- tile (GEMM)

using legacy_tile::kTok;
using legacy_tile::kXStride;
using legacy_tile::XStage;

// Panel of 8 rows per block: 8 registers of signed quants (lane r = bytes 4j..4j+3 of row
// r), for Q8_0 8 more with their absolute values, then the FP32 scales, -128 * the row
// sums of quants, and the FP32 mins.
template <typename B>
struct Panel {
  static constexpr bool kSign = Layout<B>::kBits == 8;  // Q8_0: sign trick
  static constexpr int kQ = 0;
  static constexpr int kAbs = 8;
  static constexpr int kD = kSign ? 16 : 8;
  static constexpr int kC = kD + 1;
  static constexpr int kM = kD + 2;
  static constexpr int kRegs = kD + (Layout<B>::kMin ? 3 : 2);
};

template <typename B>
void repack(const uint8_t* w, size_t ws, int64_t valid, int64_t nb, Y32* out) {
  using L = Layout<B>;
  using P = Panel<B>;
  constexpr int kB = sizeof(B);
  const uint8_t* rp[8];
  for (int r = 0; r < 8; ++r) rp[r] = w + (r < valid ? r : valid - 1) * ws;
  const __m256i lo4 = _mm256_set1_epi8(0x0f);
  const __m256i ones8 = _mm256_set1_epi8(1);
  const __m256i ones16 = _mm256_set1_epi16(1);
  for (int64_t b = 0; b < nb; ++b, out += P::kRegs) {
    const int64_t at = b * kB;
    auto gather = [&](int byte) {
      return _mm256_setr_epi32(static_cast<int>(load32(rp[0] + at + byte)), static_cast<int>(load32(rp[1] + at + byte)),
                               static_cast<int>(load32(rp[2] + at + byte)), static_cast<int>(load32(rp[3] + at + byte)),
                               static_cast<int>(load32(rp[4] + at + byte)), static_cast<int>(load32(rp[5] + at + byte)),
                               static_cast<int>(load32(rp[6] + at + byte)),
                               static_cast<int>(load32(rp[7] + at + byte)));
    };
    // 8 rows x 4 dwords -> 4 registers of one dword from each row, lanes in row order.
    auto transpose4 = [&](int byte0, __m256i* t) {
      __m256i z[4];
      for (int g = 0; g < 4; ++g)
        z[g] = _mm256_inserti128_si256(_mm256_castsi128_si256(load128(rp[g] + at + byte0)),
                                       load128(rp[g + 4] + at + byte0), 1);
      const __m256i a0 = _mm256_unpacklo_epi32(z[0], z[1]);
      const __m256i a1 = _mm256_unpackhi_epi32(z[0], z[1]);
      const __m256i a2 = _mm256_unpacklo_epi32(z[2], z[3]);
      const __m256i a3 = _mm256_unpackhi_epi32(z[2], z[3]);
      t[0] = _mm256_unpacklo_epi64(a0, a2);
      t[1] = _mm256_unpackhi_epi64(a0, a2);
      t[2] = _mm256_unpacklo_epi64(a1, a3);
      t[3] = _mm256_unpackhi_epi64(a1, a3);
    };
    __m256i q[8];
    __m256i sum = _mm256_setzero_si256();
    if constexpr (L::kBits == 8) {
      transpose4(L::kQs, q);
      transpose4(L::kQs + 16, q + 4);
      for (int j = 0; j < 8; ++j) {
        _mm256_store_si256(reinterpret_cast<__m256i*>(out + P::kQ + j), q[j]);
        _mm256_store_si256(reinterpret_cast<__m256i*>(out + P::kAbs + j), _mm256_abs_epi8(q[j]));
      }
    } else {
      __m256i t[4];
      transpose4(L::kQs, t);
      for (int j = 0; j < 4; ++j) {
        q[j] = _mm256_and_si256(t[j], lo4);
        q[j + 4] = _mm256_and_si256(_mm256_srli_epi16(t[j], 4), lo4);
      }
      if constexpr (L::kBits == 5) {
        const __m256i qh = gather(L::kQh);
        const __m256i bits_lo = _mm256_set1_epi32(0x08040201);
        const __m256i bits_hi = _mm256_set1_epi32(static_cast<int>(0x80402010u));
        const __m256i sixteen = _mm256_set1_epi8(16);
        const __m256i dword_base =
            _mm256_setr_epi32(0, 0x04040404, 0x08080808, 0x0C0C0C0C, 0, 0x04040404, 0x08080808, 0x0C0C0C0C);
        for (int k = 0; k < 4; ++k) {
          // qh byte k holds values 8k..8k+7: dword 2k's in its low nibble, 2k+1's in the high.
          const __m256i rep =
              _mm256_shuffle_epi8(qh, _mm256_add_epi8(dword_base, _mm256_set1_epi8(static_cast<char>(k))));
          const __m256i s0 = _mm256_cmpeq_epi8(_mm256_and_si256(rep, bits_lo), bits_lo);
          const __m256i s1 = _mm256_cmpeq_epi8(_mm256_and_si256(rep, bits_hi), bits_hi);
          q[2 * k] = _mm256_or_si256(q[2 * k], _mm256_and_si256(s0, sixteen));
          q[2 * k + 1] = _mm256_or_si256(q[2 * k + 1], _mm256_and_si256(s1, sixteen));
        }
      }
      if constexpr (L::kOffset != 0) {
        const __m256i o = _mm256_set1_epi8(static_cast<char>(L::kOffset));
        for (int j = 0; j < 8; ++j) q[j] = _mm256_sub_epi8(q[j], o);
      }
      // Row sums: 8 values per byte lane fit in a byte (Q4_0 -64..56, Q5_0 -128..120,
      // Q4_1 0..120 signed; Q5_1 0..248 unsigned).
      __m256i s8 = q[0];
      for (int j = 1; j < 8; ++j) s8 = _mm256_add_epi8(s8, q[j]);
      const __m256i pairs =
          L::kBits == 5 && L::kMin ? _mm256_maddubs_epi16(s8, ones8) : _mm256_maddubs_epi16(ones8, s8);
      sum = _mm256_madd_epi16(pairs, ones16);
      for (int j = 0; j < 8; ++j) _mm256_store_si256(reinterpret_cast<__m256i*>(out + P::kQ + j), q[j]);
    }
    const __m256i dm = gather(0);
    _mm256_store_ps(reinterpret_cast<float*>(out + P::kD),
                    _mm256_cvtph_ps(_mm_packus_epi32(
                        _mm256_castsi256_si128(_mm256_and_si256(dm, _mm256_set1_epi32(0xffff))),
                        _mm256_extracti128_si256(_mm256_and_si256(dm, _mm256_set1_epi32(0xffff)), 1))));
    _mm256_store_si256(reinterpret_cast<__m256i*>(out + P::kC),
                       _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(sum, 7)));
    if constexpr (L::kMin) {
      static_assert(L::kM == 2);
      const __m256i m = _mm256_srli_epi32(dm, 16);
      _mm256_store_ps(reinterpret_cast<float*>(out + P::kM),
                      _mm256_cvtph_ps(_mm_packus_epi32(_mm256_castsi256_si128(m), _mm256_extracti128_si256(m, 1))));
    }
  }
}

// 8 rows by kT tokens. For the nibble formats, maddubs(x + 128, w) pairs stay within
// 2 * 255 * |w|max, so kGroup of them add up in int16 before one pmaddwd: 8 for Q4_0
// (|w| <= 8: 32640), 4 for Q5_0 and Q4_1 (16, 15), 2 for Q5_1 (31).
template <typename B, int kT>
void micro(int64_t nb, const Y32* p, const uint8_t* xq, const float* xd, const float* xs, float* y, size_t ys,
           int64_t valid) {
  using L = Layout<B>;
  using P = Panel<B>;
  constexpr int kGroup = L::kBits == 8 ? 1 : L::kBits == 4 ? (L::kMin ? 4 : 8) : (L::kMin ? 2 : 4);
  const __m256i ones16 = _mm256_set1_epi16(1);
  __m256 accf[kT];
#pragma GCC unroll 16
  for (int t = 0; t < kT; ++t) accf[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b, p += P::kRegs, xq += kXStride, xd += kTok, xs += kTok) {
    __m256i acc[kT];
    const __m256i c = _mm256_load_si256(reinterpret_cast<const __m256i*>(p + P::kC));
#pragma GCC unroll 16
    for (int t = 0; t < kT; ++t) acc[t] = c;
#pragma GCC unroll 8
    for (int j0 = 0; j0 < 8; j0 += kGroup) {
      __m256i s16[kT];
#pragma GCC unroll 8
      for (int j = j0; j < j0 + kGroup; ++j) {
        const __m256i wq = _mm256_load_si256(reinterpret_cast<const __m256i*>(p + P::kQ + j));
        if constexpr (P::kSign) {
          const __m256i wa = _mm256_load_si256(reinterpret_cast<const __m256i*>(p + P::kAbs + j));
#pragma GCC unroll 16
          for (int t = 0; t < kT; ++t) {
            const __m256i xb = _mm256_set1_epi32(static_cast<int>(load32(xq + t * 32 + 4 * j)));
            s16[t] = _mm256_maddubs_epi16(wa, _mm256_sign_epi8(xb, wq));
          }
        } else {
#pragma GCC unroll 16
          for (int t = 0; t < kT; ++t) {
            const __m256i xb = _mm256_set1_epi32(static_cast<int>(load32(xq + t * 32 + 4 * j)));
            const __m256i pr = _mm256_maddubs_epi16(xb, wq);
            s16[t] = j == j0 ? pr : _mm256_add_epi16(s16[t], pr);
          }
        }
      }
#pragma GCC unroll 16
      for (int t = 0; t < kT; ++t) acc[t] = _mm256_add_epi32(acc[t], _mm256_madd_epi16(s16[t], ones16));
    }
    const __m256 dw = _mm256_load_ps(reinterpret_cast<const float*>(p + P::kD));
#pragma GCC unroll 16
    for (int t = 0; t < kT; ++t)
      accf[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[t]), _mm256_mul_ps(dw, _mm256_set1_ps(xd[t])), accf[t]);
    if constexpr (L::kMin) {
      const __m256 mw = _mm256_load_ps(reinterpret_cast<const float*>(p + P::kM));
#pragma GCC unroll 16
      for (int t = 0; t < kT; ++t) accf[t] = _mm256_fmadd_ps(mw, _mm256_set1_ps(xs[t]), accf[t]);
    }
  }
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(valid)), lane);
#pragma GCC unroll 16
  for (int t = 0; t < kT; ++t) {
    if (valid >= 8) {
      _mm256_storeu_ps(y + t * ys, accf[t]);
    } else {
      _mm256_maskstore_ps(y + t * ys, mask, accf[t]);
    }
  }
}

template <typename B, int kT>
void micro_tokens(int64_t nb, const Y32* p, const XStage& st, int64_t tokens, float* y, size_t ys, int64_t valid) {
  int64_t t = 0;
  auto run = [&](auto tag) {
    constexpr int kN = decltype(tag)::value;
    micro<B, kN>(nb, p, st.q + t * 32, st.d + t, st.s + t, y + t * ys, ys, valid);
    t += kN;
  };
  for (; t + kT <= tokens;) run(std::integral_constant<int, kT>{});
  if (tokens - t >= 4) run(std::integral_constant<int, 4>{});
  if (tokens - t >= 2) run(std::integral_constant<int, 2>{});
  if (tokens - t >= 1) run(std::integral_constant<int, 1>{});
}

// The target for legacy_tile.h: panels of 8 rows; Q8_0 keeps its activations signed
// (the sign trick) and runs 4 tokens a block, the others 6.
struct Avx2Tile {
  using Reg = Y32;
  static constexpr int64_t kRows = 8;
  template <typename B>
  static constexpr bool kFlip = !Panel<B>::kSign;
  template <typename B>
  static constexpr int panel_regs() {
    return Panel<B>::kRegs;
  }
  template <typename B>
  static float dot(int64_t n, const void* w, const void* x) {
    return simd::dot<B>(n, w, x);
  }
  template <typename B>
  static void repack(const uint8_t* w, size_t ws, int64_t valid, int64_t nb, Y32* out, const uint8_t*, int64_t) {
    simd::repack<B>(w, ws, valid, nb, out);
  }
  template <typename B>
  static void micro_tokens(int64_t nb, const Y32* p, const XStage& st, int64_t tokens, float* y, size_t ys,
                           int64_t valid) {
    simd::micro_tokens<B, (Panel<B>::kSign ? 4 : 6)>(nb, p, st, tokens, y, ys, valid);
  }
};

template <typename B>
void fill(DotKernels& k) {
  k.dot = dot<B>;
  k.tile = legacy_tile::tile<Avx2Tile, B>;
  k.quantize_x = Activations<V256>::q8_0;
}

}  // namespace

void register_legacy_avx2(DType t, DotKernels& k) {
  legacy::with_block(t, [&]<typename B>() { fill<B>(k); });
}

}  // namespace pagoda::simd

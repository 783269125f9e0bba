// Internal to kquant_avx2.cpp and kquant_avx512.cpp: the parts of the K-quant SIMD
// kernels both targets share, written with AVX2 intrinsics (the AVX-512 file is built
// with AVX2 too).
//
// Everything here has internal linkage (an unnamed namespace) on purpose: each kernel
// file compiles this header with its own target flags, and one shared inline definition
// would let the linker hand the AVX2 path a copy compiled for AVX-512.
//
// The tile (prefill) kernels of both targets work the same way:
//  - The activation rows of up to 64 tokens are repacked once per call ("XPack"): token
//    quants transposed so that one vector holds the same 4 consecutive values of L tokens
//    (L = 16 for AVX-512, 8 for AVX2), stored as unsigned bytes x + 128, plus per-token
//    scales and bsums pairs in the same lane order.
//  - Each weight super-block is unpacked once per call into signed int8 levels and
//    integer group scales (WeightSB), then broadcast 4 levels at a time against the
//    token vectors (u8 x s8 dot products, 4 values per 32-bit lane).
//  - The + 128 bias adds 128 * sum_g sc_g * sum(q in g) to every token's integer sum; that
//    constant depends on the weights only, so it is computed once per unpacked
//    super-block (WeightSB::corr) and subtracted.
// Integer sums are exact (bounds at each use); only the float combination of the
// super-block sums differs in order from the scalar references.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "quant/blocks.h"

namespace pagoda::simd {
namespace {

inline float half_to_float(uint16_t h) { return _cvtsh_ss(h); }

// --- Scale decoding ------------------------------------------------------------------

// The 6-bit scales and mins of Q4_K/Q5_K (see unpack_k4_scale_min): bytes 0..7 = scales
// of groups 0..7, bytes 8..15 = their mins. With u0..u2 the three 32-bit words of the
// 12 bytes: scales 0..3 = u0 & 63, scales 4..7 = low nibbles of u2 with the top bits of
// u0, mins 0..3 = u1 & 63, mins 4..7 = high nibbles of u2 with the top bits of u1. Reads
// 16 bytes; the 4 after the scales belong to the same block (qh or qs).
inline __m128i decode_k4_scales(const uint8_t* s) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s));
  const __m128i a = _mm_shuffle_epi32(v, _MM_SHUFFLE(2, 1, 2, 0));  // u0 u2 u1 u2
  const __m128i b = _mm_shuffle_epi32(v, _MM_SHUFFLE(1, 1, 0, 0));  // u0 u0 u1 u1
  const __m128i low = _mm_and_si128(_mm_srlv_epi32(a, _mm_setr_epi32(0, 0, 0, 4)),
                                    _mm_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f));
  // (u >> 6 & 3) << 4 per byte is u >> 2 & 0x30.
  const __m128i high = _mm_and_si128(_mm_srli_epi32(b, 2), _mm_setr_epi32(0, 0x30303030, 0, 0x30303030));
  return _mm_or_si128(low, high);
}

// The 16 signed group scales of Q3_K (see unpack_q3_K_scales), already minus 32.
inline __m128i decode_q3_scales(const uint8_t* s) {
  uint32_t u[3];
  std::memcpy(u, s, 12);
  const __m128i v = _mm_setr_epi32(
      static_cast<int>((u[0] & 0x0f0f0f0fu) | ((u[2] & 0x03030303u) << 4)),                 // groups 0..3
      static_cast<int>((u[1] & 0x0f0f0f0fu) | (((u[2] >> 2) & 0x03030303u) << 4)),          // groups 4..7
      static_cast<int>(((u[0] >> 4) & 0x0f0f0f0fu) | (((u[2] >> 4) & 0x03030303u) << 4)),   // groups 8..11
      static_cast<int>(((u[1] >> 4) & 0x0f0f0f0fu) | (((u[2] >> 6) & 0x03030303u) << 4)));  // groups 12..15
  return _mm_sub_epi8(v, _mm_set1_epi8(32));
}

// Bit `from` of every byte of v moved to bit `to` (other bits arbitrary; callers mask).
template <int from, int to>
inline __m256i move_bit(__m256i v) {
  if constexpr (from > to)
    return _mm256_srli_epi16(v, from - to);
  else if constexpr (from < to)
    return _mm256_slli_epi16(v, to - from);
  else
    return v;
}

inline void store256(void* p, __m256i v) { _mm256_storeu_si256(static_cast<__m256i*>(p), v); }
// Four int8 levels as one 32-bit lane value (memcpy: no aliasing questions, one load).
inline int32_t load4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// --- Level decoders (32 values per vector, unsigned levels) ---------------------------

// Q5_K values 64c..64c+63 from qs[32c..] and qh: [group 2c], [group 2c + 1], 0..31.
template <int c>
inline void q5_levels(const uint8_t* qs, __m256i qh, __m256i& lo, __m256i& hi) {
  const __m256i m4 = _mm256_set1_epi8(0x0f);
  const __m256i b4 = _mm256_set1_epi8(0x10);
  const __m256i v = load256(qs + 32 * c);
  lo = _mm256_or_si256(_mm256_and_si256(v, m4), _mm256_and_si256(move_bit<2 * c, 4>(qh), b4));
  hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), m4), _mm256_and_si256(move_bit<2 * c + 1, 4>(qh), b4));
}

// Q6_K values 128h + 32k + l (k = 0..3) as q + 32, 0..63.
inline void q6_levels(const BlockQ6_K& b, int h, __m256i* u) {
  const __m256i m4 = _mm256_set1_epi8(0x0f);
  const __m256i m2 = _mm256_set1_epi8(0x30);
  const __m256i l1 = load256(b.ql + 64 * h);
  const __m256i l2 = load256(b.ql + 64 * h + 32);
  const __m256i hb = load256(b.qh + 32 * h);
  u[0] = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_and_si256(_mm256_slli_epi16(hb, 4), m2));
  u[1] = _mm256_or_si256(_mm256_and_si256(l2, m4), _mm256_and_si256(_mm256_slli_epi16(hb, 2), m2));
  u[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4), _mm256_and_si256(hb, m2));
  u[3] =
      _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l2, 4), m4), _mm256_and_si256(_mm256_srli_epi16(hb, 2), m2));
}

// Q3_K values 128h + 32k + l as q + 4, 0..7: two bits from qs, the third from hmask.
template <int h, int k>
inline __m256i q3_level(__m256i qs, __m256i hm) {
  const __m256i low = _mm256_and_si256(_mm256_srli_epi16(qs, 2 * k), _mm256_set1_epi8(3));
  return _mm256_or_si256(low, _mm256_and_si256(move_bit<4 * h + k, 2>(hm), _mm256_set1_epi8(4)));
}
template <int h>
inline void q3_levels(const BlockQ3_K& b, __m256i hm, __m256i* u) {
  const __m256i qs = load256(b.qs + 32 * h);
  u[0] = q3_level<h, 0>(qs, hm);
  u[1] = q3_level<h, 1>(qs, hm);
  u[2] = q3_level<h, 2>(qs, hm);
  u[3] = q3_level<h, 3>(qs, hm);
}

// Q2_K values 128h + 32k + l, 0..3.
inline void q2_levels(const BlockQ2_K& b, int h, __m256i* u) {
  const __m256i m3 = _mm256_set1_epi8(3);
  const __m256i v = load256(b.qs + 32 * h);
  u[0] = _mm256_and_si256(v, m3);
  u[1] = _mm256_and_si256(_mm256_srli_epi16(v, 2), m3);
  u[2] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m3);
  u[3] = _mm256_and_si256(_mm256_srli_epi16(v, 6), m3);
}

// --- One weight super-block, unpacked for the tile kernels ---------------------------

struct alignas(64) WeightSB {
  int8_t q[kQK_K];  // levels as signed int8 (k_unpack.h), in value order
  int32_t sc[16];   // integer group scales (groups of 256 / groups values)
  int32_t mins[8];  // pairs of int16 group mins (low, high), matching XPack's bsums pairs
  int32_t corr;     // 128 * sum_g sc[g] * sum(q in group g): the bias of x + 128
  float d;          // super-block scale
  float dmin;       // super-block min scale (formats with mins)
};

// The scale stores below are whole vectors, and the kernels read them back with loads of
// the same width or narrower: a load wider than the store that wrote it cannot be
// forwarded from the store buffer and waits for the store to retire.
inline void store_k4_scales(const uint8_t* scales, WeightSB& o) {
  const __m128i sm = decode_k4_scales(scales);
  _mm256_store_si256(reinterpret_cast<__m256i*>(o.sc), _mm256_cvtepu8_epi32(sm));
  _mm_store_si128(reinterpret_cast<__m128i*>(o.mins), _mm_cvtepu8_epi16(_mm_srli_si128(sm, 8)));
}

inline void store_sc16(__m128i sc8, WeightSB& o) {
  _mm256_store_si256(reinterpret_cast<__m256i*>(o.sc), _mm256_cvtepi8_epi32(sc8));
  _mm256_store_si256(reinterpret_cast<__m256i*>(o.sc + 8), _mm256_cvtepi8_epi32(_mm_srli_si128(sc8, 8)));
}

// Each format: its block, group size (values per integer scale), the number of bsums
// pairs its mins need (0: no mins; 4: mins per 32 values, pairs of 32-value sums; 8: mins
// per 16 values, pairs of the raw 16-value bsums), and the unpacking into WeightSB minus
// corr (filled by the target's kernel, which has the faster instructions for it).
struct FmtQ4K {
  using Block = BlockQ4_K;
  static constexpr int kGroup = 32;
  static constexpr int kPairs = 4;
  static void unpack(const Block& b, WeightSB& o) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    for (int c = 0; c < 4; ++c) {
      const __m256i v = load256(b.qs + 32 * c);
      store256(o.q + 64 * c, _mm256_and_si256(v, m4));
      store256(o.q + 64 * c + 32, _mm256_and_si256(_mm256_srli_epi16(v, 4), m4));
    }
    store_k4_scales(b.scales, o);
    o.d = half_to_float(b.d);
    o.dmin = half_to_float(b.dmin);
  }
};

struct FmtQ5K {
  using Block = BlockQ5_K;
  static constexpr int kGroup = 32;
  static constexpr int kPairs = 4;
  static void unpack(const Block& b, WeightSB& o) {
    const __m256i h = load256(b.qh);
    __m256i lo, hi;
    q5_levels<0>(b.qs, h, lo, hi);
    store256(o.q, lo);
    store256(o.q + 32, hi);
    q5_levels<1>(b.qs, h, lo, hi);
    store256(o.q + 64, lo);
    store256(o.q + 96, hi);
    q5_levels<2>(b.qs, h, lo, hi);
    store256(o.q + 128, lo);
    store256(o.q + 160, hi);
    q5_levels<3>(b.qs, h, lo, hi);
    store256(o.q + 192, lo);
    store256(o.q + 224, hi);
    store_k4_scales(b.scales, o);
    o.d = half_to_float(b.d);
    o.dmin = half_to_float(b.dmin);
  }
};

struct FmtQ6K {
  using Block = BlockQ6_K;
  static constexpr int kGroup = 16;
  static constexpr int kPairs = 0;
  static void unpack(const Block& b, WeightSB& o) {
    const __m256i off = _mm256_set1_epi8(32);
    for (int h = 0; h < 2; ++h) {
      __m256i u[4];
      q6_levels(b, h, u);
      for (int k = 0; k < 4; ++k) store256(o.q + 128 * h + 32 * k, _mm256_sub_epi8(u[k], off));
    }
    store_sc16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales)), o);
    o.d = half_to_float(b.d);
    o.dmin = 0.0f;
  }
};

struct FmtQ3K {
  using Block = BlockQ3_K;
  static constexpr int kGroup = 16;
  static constexpr int kPairs = 0;
  static void unpack(const Block& b, WeightSB& o) {
    const __m256i off = _mm256_set1_epi8(4);
    const __m256i hm = load256(b.hmask);
    __m256i u[8];
    q3_levels<0>(b, hm, u);
    q3_levels<1>(b, hm, u + 4);
    for (int k = 0; k < 8; ++k) store256(o.q + 32 * k, _mm256_sub_epi8(u[k], off));
    store_sc16(decode_q3_scales(b.scales), o);
    o.d = half_to_float(b.d);
    o.dmin = 0.0f;
  }
};

struct FmtQ2K {
  using Block = BlockQ2_K;
  static constexpr int kGroup = 16;
  static constexpr int kPairs = 8;
  static void unpack(const Block& b, WeightSB& o) {
    for (int h = 0; h < 2; ++h) {
      __m256i u[4];
      q2_levels(b, h, u);
      for (int k = 0; k < 4; ++k) store256(o.q + 128 * h + 32 * k, u[k]);
    }
    const __m128i sb = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales));
    const __m128i m4 = _mm_set1_epi8(0x0f);
    store_sc16(_mm_and_si128(sb, m4), o);
    _mm256_store_si256(reinterpret_cast<__m256i*>(o.mins),
                       _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sb, 4), m4)));
    o.d = half_to_float(b.d);
    o.dmin = half_to_float(b.dmin);
  }
};

// --- Activations repacked for the tile kernels ----------------------------------------

// Up to 64 tokens in vectors of L lanes. Per (super-block b, token vector v), at
// offset (b * nv + v) * bytes(): 64 x L int32 (4 biased quants each: lane j holds
// values 4k..4k+3 of token v*L + j as x + 128), then kPairs x L int32 (int16 bsums pairs,
// see the Fmt structs), then L floats (the tokens' scales). Lanes past the last token
// hold zero quants (stored as 128) and scale 0, so they produce 0.
template <int L, int NP>
struct XPackLayout {
  static constexpr size_t kQBytes = 64 * L * 4;
  static constexpr size_t kBsOff = kQBytes;
  static constexpr size_t kDOff = kBsOff + NP * L * 4;
  static constexpr size_t kBytes = kDOff + L * 4;
  static_assert(kBytes % (4 * L) == 0, "entries start vector-aligned");
};

// The bsums pair p of one Q8_K block (see FmtQ*::kPairs).
template <int NP>
inline int32_t bsums_pair(const BlockQ8_K& x, int p) {
  int32_t lo, hi;
  if constexpr (NP == 4) {
    lo = x.bsums[4 * p] + x.bsums[4 * p + 1];
    hi = x.bsums[4 * p + 2] + x.bsums[4 * p + 3];
  } else {
    lo = x.bsums[2 * p];
    hi = x.bsums[2 * p + 1];
  }
  return static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint16_t>(lo)) |
                              (static_cast<uint32_t>(static_cast<uint16_t>(hi)) << 16));
}

// The non-quant parts of one (b, v) XPack entry: bsums pairs and scales.
template <int L, int NP>
inline void pack_x_extras(const uint8_t* x, size_t x_stride, int count, int64_t b, uint8_t* dst) {
  using Lay = XPackLayout<L, NP>;
  auto* bs = reinterpret_cast<int32_t*>(dst + Lay::kBsOff);
  auto* d = reinterpret_cast<float*>(dst + Lay::kDOff);
  for (int j = 0; j < L; ++j) {
    if (j < count) {
      const auto& blk = reinterpret_cast<const BlockQ8_K*>(x + j * x_stride)[b];
      for (int p = 0; p < NP; ++p) bs[p * L + j] = bsums_pair<NP>(blk, p);
      d[j] = blk.d;
    } else {
      for (int p = 0; p < NP; ++p) bs[p * L + j] = 0;
      d[j] = 0.0f;
    }
  }
}

// A 64-byte aligned scratch buffer per thread, grown on demand and never shrunk.
inline uint8_t* scratch(size_t bytes) {
  thread_local std::vector<uint8_t> buf;
  if (buf.size() < bytes + 64) buf.resize(bytes + 64);
  const auto p = reinterpret_cast<uintptr_t>(buf.data());
  return buf.data() + ((64 - (p & 63)) & 63);
}

// --- The tile driver ------------------------------------------------------------------

inline constexpr int kTokenChunk = 64;  // tokens per XPack
inline constexpr int kRowBlock = 16;    // rows whose accumulators stay in L1 across b

// Isa provides: kLanes, kMaxVecs (token vectors per microkernel call), kMinTileTokens,
//   pack_quants(x, x_stride, count, b, dst)    the quant part of one XPack entry,
//   correction<G>(WeightSB&)                   WeightSB::corr,
//   rows2<G, NP, NV>(w0, w1, xp, acc0, acc1)   two weight rows (w1 may equal w0) by NV
//                                              token vectors: acc[v*L + j] += dot.
// Fmt is one of the FmtQ*K above; Dot is the target's single-row dot, used instead when a
// token chunk is too short to fill the lanes (fewer than Isa::kMinTileTokens tokens).
using DotFn = float (*)(int64_t, const void*, const void*);
template <class Isa, class Fmt, DotFn Dot>
struct TileDriver {
  static constexpr int L = Isa::kLanes;
  static constexpr int G = Fmt::kGroup;
  static constexpr int NP = Fmt::kPairs;
  using Lay = XPackLayout<L, NP>;

  template <int NV>
  static void call_rows2(const WeightSB& w0, const WeightSB& w1, const uint8_t* xp, float* a0, float* a1) {
    Isa::template rows2<G, NP, NV>(w0, w1, xp, a0, a1);
  }

  // One row pair against `nv` token vectors, in calls of at most kMaxVecs.
  static void rows2_all(const WeightSB& w0, const WeightSB& w1, const uint8_t* xp, int nv, float* a0, float* a1) {
    for (int v = 0; v < nv; v += Isa::kMaxVecs) {
      const int cnt = std::min(Isa::kMaxVecs, nv - v);
      const uint8_t* p = xp + v * Lay::kBytes;
      float* b0 = a0 + v * L;
      float* b1 = a1 + v * L;
      switch (cnt) {
        case 1:
          call_rows2<1>(w0, w1, p, b0, b1);
          break;
        case 2:
          if constexpr (Isa::kMaxVecs >= 2) call_rows2<2>(w0, w1, p, b0, b1);
          break;
        case 3:
          if constexpr (Isa::kMaxVecs >= 3) call_rows2<3>(w0, w1, p, b0, b1);
          break;
        case 4:
          if constexpr (Isa::kMaxVecs >= 4) call_rows2<4>(w0, w1, p, b0, b1);
          break;
        default:
          break;
      }
    }
  }

  static void unpack(const uint8_t* row, int64_t b, WeightSB& o) {
    Fmt::unpack(reinterpret_cast<const typename Fmt::Block*>(row)[b], o);
    o.corr = Isa::template correction<G>(o);
  }

  static void tile(int64_t n, const uint8_t* w, size_t w_stride, int64_t rows, const uint8_t* x, size_t x_stride,
                   int64_t tokens, float* y, size_t y_stride) {
    const int64_t nb = n / kQK_K;
    for (int64_t t0 = 0; t0 < tokens; t0 += kTokenChunk) {
      const int nt = static_cast<int>(std::min<int64_t>(kTokenChunk, tokens - t0));
      const uint8_t* xt = x + t0 * x_stride;
      float* yt = y + t0 * y_stride;
      if (nt < Isa::kMinTileTokens) {
        for (int64_t r = 0; r < rows; ++r)
          for (int t = 0; t < nt; ++t) yt[t * y_stride + r] = Dot(n, w + r * w_stride, xt + t * x_stride);
        continue;
      }
      const int nv = (nt + L - 1) / L;
      uint8_t* xp = scratch(static_cast<size_t>(nb * nv) * Lay::kBytes);
      for (int64_t b = 0; b < nb; ++b)
        for (int v = 0; v < nv; ++v) {
          uint8_t* dst = xp + (b * nv + v) * Lay::kBytes;
          const int count = std::min(L, nt - v * L);
          Isa::pack_quants(xt + v * L * x_stride, x_stride, count, b, dst);
          pack_x_extras<L, NP>(xt + v * L * x_stride, x_stride, count, b, dst);
        }
      // One spare row: the partner of an odd last row writes there.
      alignas(64) float acc[kRowBlock + 1][kTokenChunk];
      WeightSB ws[2];
      for (int64_t r0 = 0; r0 < rows; r0 += kRowBlock) {
        const int rb = static_cast<int>(std::min<int64_t>(kRowBlock, rows - r0));
        std::memset(acc, 0, sizeof(acc));
        for (int64_t b = 0; b < nb; ++b) {
          const uint8_t* xb = xp + b * nv * Lay::kBytes;
          for (int r = 0; r < rb; r += 2) {
            const uint8_t* row0 = w + (r0 + r) * w_stride;
            unpack(row0, b, ws[0]);
            if (r + 1 < rb) {
              unpack(row0 + w_stride, b, ws[1]);
              rows2_all(ws[0], ws[1], xb, nv, acc[r], acc[r + 1]);
            } else {
              rows2_all(ws[0], ws[0], xb, nv, acc[r], acc[kRowBlock]);
            }
          }
        }
        for (int t = 0; t < nt; ++t)
          for (int r = 0; r < rb; ++r) yt[t * y_stride + r0 + r] = acc[r][t];
      }
    }
  }
};

}  // namespace
}  // namespace pagoda::simd

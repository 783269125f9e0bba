// avx2 bodies of the 2:4 sparse formats (quant/sparse24.h): the single-token dot reads
// only the sparse bytes, as the avx512 VBMI body does, with in-lane shuffles instead of
// its 64-byte permutes; the many-token tile runs on the dense AVX2 tiles
// (sparse24_tile.h).
//
// Per block: each 6-bit code is looked up in a table of its four positions as in-lane
// pshufb indices, and the eight codes build one index register whose 128-bit lanes are
// [slots 0-7 | slots 16-23] and [slots 8-15 | slots 24-31]: slots 0-15 sit in the first
// activation block (one pshufb of its 32 bytes, lane by lane), slots 16-31 in the second,
// and a dword blend joins the two. The weights' qwords are permuted into the same order,
// products go through maddubs and pmaddwd (|w| x sign(x, w) for Q8: pairs stay within
// int16 as |x| <= 127; Q4's nibbles minus 8 x the activations, each within int16), and
// dwords 0-1 and 4-5 of the sum belong to the first activation block, 2-3 and 6-7 to
// the second, each scaled by its own activation scale.
//
// Everything here has internal linkage and uses no std:: templates over shared types, so
// no AVX2 copy of an inline function can be picked by the linker for code that runs on
// other CPUs.
#include "kernels/simd/simd_intrinsics.h"

#include "kernels/matmul/simd_registry.h"
#include "kernels/matmul/sparse24_tile.h"
#include "quant/blocks.h"
#include "quant/sparse24.h"

namespace pagoda::simd {
namespace {

// Code -> its four positions as bytes of a little-endian uint32, within the code's eight
// positions (0..7); kCodeIndex8 is the same plus 8 (the second code of a 16-byte lane).
struct CodeIndex {
  uint32_t v[64];
};
constexpr CodeIndex make_code_index(uint32_t plus) {
  CodeIndex t{};
  for (int c = 0; c < 64; ++c) {
    const int p = s24_code_positions(c);
    uint32_t v = 0;
    for (int s = 0; s < 4; ++s) v |= static_cast<uint32_t>(4 * (s / 2) + ((p >> (2 * s)) & 3) + plus) << (8 * s);
    t.v[c] = v;
  }
  return t;
}
constexpr CodeIndex kCodeIndex = make_code_index(0);
constexpr CodeIndex kCodeIndex8 = make_code_index(8);

// The pshufb indices of a block's 32 kept slots (lane order described above).
inline __m256i indices(const uint8_t* codes) {
  uint64_t c;
  std::memcpy(&c, codes, sizeof c);
  auto pair = [c](int j) {
    return static_cast<long long>(kCodeIndex.v[(c >> (6 * j)) & 63] |
                                  static_cast<uint64_t>(kCodeIndex8.v[(c >> (6 * j + 6)) & 63]) << 32);
  };
  // Lane 0: codes 0-1 (slots 0-7), codes 4-5 (slots 16-23); lane 1: codes 2-3, 6-7.
  return _mm256_set_epi64x(pair(6), pair(2), pair(4), pair(0));
}

// The 32 activation quants at the kept positions, in the lane order of indices().
inline __m256i gather(__m256i idx, const uint8_t* x) {
  const __m256i g0 = _mm256_shuffle_epi8(load256(x + 2), idx);
  const __m256i g1 = _mm256_shuffle_epi8(load256(x + 36), idx);
  return _mm256_blend_epi32(g0, g1, 0xcc);
}

// Dwords 0-1 and 4-5 scaled by dw * dx0, 2-3 and 6-7 by dw * dx1.
inline __m256 scales(float dw, const uint8_t* x) {
  const __m128 s = _mm_set_ps(dw * half(x + 34), dw * half(x + 34), dw * half(x), dw * half(x));
  return _mm256_set_m128(s, s);
}

inline __m256i q8_products(const uint8_t* b, __m256i xg) {
  const auto& blk = *reinterpret_cast<const BlockQ8_0S24*>(b);
  const __m256i w = _mm256_permute4x64_epi64(load256(blk.qs), 0xd8);  // qwords 0, 2, 1, 3
  const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(xg, w));
  return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

inline __m256i q4_products(const uint8_t* b, __m256i xg) {
  const auto& blk = *reinterpret_cast<const BlockQ4_0S24*>(b);
  const __m128i q = load128(blk.qs);
  const __m128i m = _mm_set1_epi8(0x0f);
  const __m128i lo = _mm_and_si128(q, m), hi = _mm_and_si128(_mm_srli_epi16(q, 4), m);
  // Slots 0-7 | 16-23 and 8-15 | 24-31: low nibbles are slots 0-15, high 16-31.
  const __m256i qv = _mm256_set_m128i(_mm_unpackhi_epi64(lo, hi), _mm_unpacklo_epi64(lo, hi));
  const __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(qv, xg), _mm256_maddubs_epi16(_mm256_set1_epi8(8), xg));
  return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

template <size_t kBlockBytes, __m256i (*kProducts)(const uint8_t*, __m256i)>
float dot(int64_t n, const void* w, const void* x) {
  const auto* b = static_cast<const uint8_t*>(w);
  const auto* xq = static_cast<const uint8_t*>(x);
  constexpr size_t kX = 2 * sizeof(BlockQ8_0);
  const int64_t nb = n / kS24Block;
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 2 <= nb; i += 2) {
    const uint8_t* b0 = b + static_cast<size_t>(i) * kBlockBytes;
    const uint8_t* x0 = xq + static_cast<size_t>(i) * kX;
    const __m256i s0 = kProducts(b0, gather(indices(b0 + 2), x0));
    const __m256i s1 = kProducts(b0 + kBlockBytes, gather(indices(b0 + kBlockBytes + 2), x0 + kX));
    acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s0), scales(half(b0), x0), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s1), scales(half(b0 + kBlockBytes), x0 + kX), acc1);
  }
  if (i < nb) {
    const uint8_t* b0 = b + static_cast<size_t>(i) * kBlockBytes;
    const uint8_t* x0 = xq + static_cast<size_t>(i) * kX;
    const __m256i s0 = kProducts(b0, gather(indices(b0 + 2), x0));
    acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s0), scales(half(b0), x0), acc0);
  }
  return hsum(_mm256_add_ps(acc0, acc1));
}

}  // namespace

void register_sparse24_avx2(DType t, DotKernels& k) {
  if (t != DType::Q8_0_S24 && t != DType::Q4_0_S24) return;
  k.tile = s24_expanded_tile(t, SimdTarget::kAvx2);
  k.quantize_x = dot_kernels(DType::Q8_0, SimdTarget::kAvx2).quantize_x;
  if (t == DType::Q8_0_S24) k.dot = dot<sizeof(BlockQ8_0S24), q8_products>;
  else k.dot = dot<sizeof(BlockQ4_0S24), q4_products>;
}

}  // namespace pagoda::simd

// avx512 + VBMI bodies of the 2:4 sparse formats (quant/sparse24.h): the single-token
// dot, decode's GEMV, which reads only the sparse bytes (40 or 24 per 64 weights against
// the dense formats' 68 or 36). Registered only when the CPU has VBMI (Ice Lake, Zen 4
// and later); without it the avx2 registration's dot (the scalar reference) stays.
//
// Per block: the eight 6-bit codes are cut into bytes with one multishift, looked up in
// a 64-entry table of packed 2-bit positions with one byte permute, spread to the 32 kept
// slots with a second multishift and offset by each slot's group: the 32 positions. A
// byte permute over the block's 64 activation quants then gathers the 32 that meet a kept
// weight, and one dpbusd multiplies them (Q8: |w| x sign(x, w); Q4: the nibbles, minus 8 x
// the activations' sum by a second dpbusd). Lanes 0-3 hold the first 32 positions' sum,
// 4-7 the second's, scaled by their own activation block's scale.
//
// Everything here has internal linkage and uses no std:: templates over shared types, so
// no AVX-512 copy of an inline function can be picked by the linker for code that runs on
// other CPUs.
#include "kernels/simd/simd_intrinsics.h"

#include "base/cpu_features.h"
#include "kernels/matmul/simd_registry.h"
#include "kernels/matmul/sparse24_tile.h"
#include "quant/blocks.h"
#include "quant/sparse24.h"

namespace pagoda::simd {
namespace {

struct alignas(64) CodeTable {
  uint8_t v[64];
};
constexpr CodeTable make_code_table() {
  CodeTable t{};
  for (int c = 0; c < 64; ++c) t.v[c] = s24_code_positions(c);
  return t;
}
constexpr CodeTable kCodeTable = make_code_table();

// Bit offsets: the 8 codes of a 48-bit field, then each kept slot's 2 bits of the packed
// positions (slot k: byte k / 4, bits 2 (k % 4)), and each slot's group offset.
struct alignas(32) Controls {
  uint8_t codes[16];
  uint8_t slots[32];
  uint8_t base[32];
};
constexpr Controls make_controls() {
  Controls c{};
  for (int j = 0; j < 16; ++j) c.codes[j] = static_cast<uint8_t>(6 * (j % 8));
  for (int k = 0; k < 32; ++k) {
    c.slots[k] = static_cast<uint8_t>(8 * (k / 4) + 2 * (k % 4));
    c.base[k] = static_cast<uint8_t>(8 * (k / 4) + 4 * ((k % 4) / 2));
  }
  return c;
}
constexpr Controls kControls = make_controls();

struct Decoder {
  __m512i table = _mm512_load_si512(kCodeTable.v);
  __m128i code_ctrl = load128(kControls.codes);
  __m256i slot_ctrl = load256(kControls.slots);
  __m256i base = load256(kControls.base);
  __m256i three = _mm256_set1_epi8(3);

  // The positions (0..63) of a block's 32 kept values; codes: the block's 6 code bytes
  // (8 bytes are read: the block continues past them).
  __m256i positions(const uint8_t* codes) const {
    uint64_t c;
    std::memcpy(&c, codes, sizeof c);
    const __m128i cut = _mm_multishift_epi64_epi8(code_ctrl, _mm_cvtsi64_si128(static_cast<long long>(c)));
    // vpermb reads the low 6 bits of each index: the code (the 2 bits above are the next one's).
    const __m512i packed = _mm512_permutexvar_epi8(_mm512_castsi128_si512(cut), table);
    const __m256i spread = _mm256_set1_epi64x(_mm_cvtsi128_si64(_mm512_castsi512_si128(packed)));
    return _mm256_add_epi8(_mm256_and_si256(_mm256_multishift_epi64_epi8(slot_ctrl, spread), three), base);
  }
};

// The 32 activation quants at the kept positions; x: the two Q8_0 blocks (34 bytes each).
inline __m256i gather(__m256i pos, const uint8_t* x) {
  const __m512i xv = _mm512_inserti64x4(_mm512_castsi256_si512(load256(x + 2)), load256(x + 36), 1);
  return _mm512_castsi512_si256(_mm512_permutexvar_epi8(_mm512_castsi256_si512(pos), xv));
}

// Lanes 0-3 scaled by dw * dx0, 4-7 by dw * dx1.
inline __m256 scales(float dw, const uint8_t* x) {
  return _mm256_set_m128(_mm_set1_ps(dw * half(x + 34)), _mm_set1_ps(dw * half(x)));
}

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline __m256i q8_products(const BlockQ8_0S24& b, __m256i xg) {
  const __m256i w = load256(b.qs);
  return _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_abs_epi8(w), _mm256_sign_epi8(xg, w));
}

inline __m256i q4_products(const BlockQ4_0S24& b, __m256i xg) {
  const __m128i q = load128(b.qs);
  const __m128i m = _mm_set1_epi8(0x0f);
  const __m256i qv = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), m), _mm_and_si128(q, m));
  const __m256i s = _mm256_dpbusd_epi32(_mm256_setzero_si256(), qv, xg);
  return _mm256_sub_epi32(s, _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(8), xg));
}

template <typename Block, __m256i (*kProducts)(const Block&, __m256i)>
float dot(int64_t n, const void* w, const void* x) {
  const auto* b = static_cast<const Block*>(w);
  const auto* xq = static_cast<const uint8_t*>(x);
  const Decoder dec;
  constexpr size_t kX = 2 * sizeof(BlockQ8_0);
  const int64_t nb = n / kS24Block;
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 2 <= nb; i += 2) {
    const uint8_t* x0 = xq + static_cast<size_t>(i) * kX;
    const __m256i s0 = kProducts(b[i], gather(dec.positions(b[i].codes), x0));
    const __m256i s1 = kProducts(b[i + 1], gather(dec.positions(b[i + 1].codes), x0 + kX));
    acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s0), scales(half(&b[i].d), x0), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s1), scales(half(&b[i + 1].d), x0 + kX), acc1);
  }
  if (i < nb) {
    const uint8_t* x0 = xq + static_cast<size_t>(i) * kX;
    const __m256i s0 = kProducts(b[i], gather(dec.positions(b[i].codes), x0));
    acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s0), scales(half(&b[i].d), x0), acc0);
  }
  return hsum(_mm256_add_ps(acc0, acc1));
}

}  // namespace

void register_sparse24_avx512(DType t, DotKernels& k) {
  if (t != DType::Q8_0_S24 && t != DType::Q4_0_S24) return;
  k.tile = s24_expanded_tile(t, SimdTarget::kAvx512);
  k.quantize_x = dot_kernels(DType::Q8_0, SimdTarget::kAvx512).quantize_x;
  if (!cpu_features().avx512vbmi) return;
  if (t == DType::Q8_0_S24) k.dot = dot<BlockQ8_0S24, q8_products>;
  else k.dot = dot<BlockQ4_0S24, q4_products>;
}

}  // namespace pagoda::simd

// avx512 + VBMI + VBMI2 bodies of the 2:4 sparse formats (quant/sparse24.h). Registered
// only when the CPU has both (Ice Lake, Zen 4 and later); otherwise the avx2 bodies stay.
//
// dot_rows (decode's GEMV: matmul hands it a work item's rows, DotKernels::gemv_by_rows):
// the activations are staged once per call (their quants contiguous, 64-byte aligned, and
// their scales as floats), then each row is streamed on its own, two blocks per step,
// prefetching ahead. Per block the eight 6-bit codes are cut into bytes by one
// multishift and looked up in a 64-entry table of 8-bit keep masks by one byte permute:
// the block's 64-bit mask of kept positions. vpcompressb under that mask picks the 32
// activation quants that meet a kept weight, in the kept values' order, and vpdpbusd
// multiplies them (Q8: (x + 128) x w, minus 128 x sum(w) by a second dpbusd; Q4: the
// nibbles x x, minus 8 x sum(x)). Lanes 0-3 and 4-7 of a block's sum get their own
// activation block's scale. dot is dot_rows of one row.
//
// expand_row (prefill: matmul expands a thread's rows once per call and runs the dense
// tile): vpexpandb under the same mask puts the kept values back at their positions, the
// dropped ones at the level of zero; the bytes equal the scalar expand_row_*'s.
//
// Everything here has internal linkage and uses no std:: templates over shared types, so
// no AVX-512 copy of an inline function can be picked by the linker for code that runs on
// other CPUs.
#include "kernels/simd/simd_intrinsics.h"

#include "base/cpu_features.h"
#include "kernels/matmul/simd_registry.h"
#include "kernels/matmul/sparse24_tile.h"
#include "quant/blocks.h"
#include "quant/rows.h"
#include "quant/sparse24.h"

namespace pagoda::simd {
namespace {

inline uint64_t load64(const void* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

template <typename Block>
float quant_dot(int64_t n, const void* w, const void* x) {
  if constexpr (sizeof(Block) == sizeof(BlockQ8_0S24)) return quant::vec_dot_q8_0_s24_q8_0(n, w, x);
  else return quant::vec_dot_q4_0_s24_q8_0(n, w, x);
}

// Code -> the keep mask of its two groups (bit p: position p of the eight is kept).
struct alignas(64) MaskTable {
  uint8_t v[64];
};
constexpr MaskTable make_mask_table() {
  MaskTable t{};
  for (int c = 0; c < 64; ++c) {
    const int p = s24_code_positions(c);
    t.v[c] = static_cast<uint8_t>(1 << (p & 3) | 1 << ((p >> 2) & 3) | 1 << (4 + ((p >> 4) & 3)) |
                                  1 << (4 + ((p >> 6) & 3)));
  }
  return t;
}
constexpr MaskTable kMaskTable = make_mask_table();

// Bit offsets of the 8 codes in each qword of a 48-bit field.
struct alignas(16) CodeCuts {
  uint8_t v[16];
};
constexpr CodeCuts make_cuts() {
  CodeCuts c{};
  for (int j = 0; j < 16; ++j) c.v[j] = static_cast<uint8_t>(6 * (j % 8));
  return c;
}
constexpr CodeCuts kCodeCuts = make_cuts();


// The keep masks of two blocks from their code fields (8 bytes read at each: the blocks
// continue past their 6 code bytes).
inline void masks(const uint8_t* codes_a, const uint8_t* codes_b, __mmask64* ka, __mmask64* kb) {
  const __m128i c = _mm_insert_epi64(_mm_cvtsi64_si128(static_cast<long long>(load64(codes_a))),
                                     static_cast<long long>(load64(codes_b)), 1);
  const __m128i cut = _mm_multishift_epi64_epi8(_mm_load_si128(reinterpret_cast<const __m128i*>(kCodeCuts.v)), c);
  // vpermb reads the low 6 bits of each index: the code (the 2 bits above are the next one's).
  const __m128i m = _mm512_castsi512_si128(
      _mm512_permutexvar_epi8(_mm512_castsi128_si512(cut), _mm512_load_si512(kMaskTable.v)));
  *ka = _cvtu64_mask64(static_cast<uint64_t>(_mm_cvtsi128_si64(m)));
  *kb = _cvtu64_mask64(static_cast<uint64_t>(_mm_extract_epi64(m, 1)));
}

inline __mmask64 mask(const uint8_t* codes) {
  __mmask64 a, b;
  masks(codes, codes, &a, &b);
  return a;
}

// Activations staged for a call: quants of 64 positions per line, scales as floats.
constexpr int64_t kMaxStaged = 32768;  // positions; longer rows take the unstaged loop
struct Staged {
  alignas(64) int8_t q[kMaxStaged];
  // Per sparse block, the lanes of its sum: 0-3 activation block 2i's scale, 4-7 2i + 1's.
  alignas(32) float d[kMaxStaged / kS24Block][8];
};

void stage(int64_t n, const uint8_t* x, Staged& s) {
  const auto* xb = reinterpret_cast<const BlockQ8_0*>(x);
  for (int64_t b = 0; b < n / kQK; ++b) {
    _mm256_store_si256(reinterpret_cast<__m256i*>(s.q + b * kQK), load256(xb[b].qs));
    const float d = half(&xb[b].d);
    for (int l = 0; l < 4; ++l) s.d[b / 2][4 * (b % 2) + l] = d;
  }
}

// One block's products in ymm: dwords 0-3 sum the kept values of the first 32
// positions, 4-7 of the second. g: the 32 gathered activation quants.
inline __m256i q8_products(const uint8_t* blk, __m256i g) {
  const __m256i w = load256(blk + 8);
  const __m256i s = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_xor_si256(g, _mm256_set1_epi8(-128)), w);
  return _mm256_sub_epi32(s, _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(-128), w));
}

inline __m256i q4_products(const uint8_t* blk, __m256i g) {
  // Low nibbles are kept values 0-15, high nibbles 16-31: the 16 bytes in both lanes, the
  // upper lane shifted by 4.
  const __m256i q = _mm256_broadcastsi128_si256(load128(blk + 8));
  const __m256i qv = _mm256_and_si256(_mm256_srlv_epi16(q, _mm256_set_epi64x(0x0004000400040004, 0x0004000400040004, 0, 0)),
                                      _mm256_set1_epi8(0x0f));
  const __m256i s = _mm256_dpbusd_epi32(_mm256_setzero_si256(), qv, g);
  return _mm256_sub_epi32(s, _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(8), g));
}

// The 32 kept activation quants of block i (64 staged positions) under mask k.
inline __m256i gather(const Staged& s, int64_t i, __mmask64 k) {
  return _mm512_castsi512_si256(
      _mm512_maskz_compress_epi8(k, _mm512_load_si512(reinterpret_cast<const __m512i*>(s.q + i * kS24Block))));
}

// The FP16 scale at the start of a block, in every lane.
inline __m256 block_scale(const uint8_t* blk) {
  return _mm256_broadcastss_ps(_mm_cvtph_ps(_mm_cvtsi32_si128(load16(blk))));
}

inline __m256 act_scales(const Staged& s, int64_t i) { return _mm256_load_ps(s.d[i]); }

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// How far ahead a row's stream is prefetched: 2 KB gave Gemma 3 270M's Q4_0_S24 decode
// 1.7x over none on two threads (its rows are 240-768 bytes, too short for the hardware
// prefetcher to ramp up within one).
constexpr int kAhead = 2048;

template <size_t kBytes, __m256i (*kProducts)(const uint8_t*, __m256i)>
inline __m256 block(const uint8_t* blk, const Staged& s, int64_t i, __mmask64 k, __m256 acc) {
  const __m256i sum = kProducts(blk, gather(s, i, k));
  return _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_mul_ps(act_scales(s, i), block_scale(blk)), acc);
}

template <size_t kBytes, __m256i (*kProducts)(const uint8_t*, __m256i)>
float row_dot(int64_t n, const uint8_t* w, const Staged& s) {
  const int64_t nb = n / kS24Block;
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 2 <= nb; i += 2) {
    const uint8_t* a = w + static_cast<size_t>(i) * kBytes;
    _mm_prefetch(reinterpret_cast<const char*>(a) + kAhead, _MM_HINT_T0);
    if (2 * kBytes > 64) _mm_prefetch(reinterpret_cast<const char*>(a) + kAhead + 64, _MM_HINT_T0);
    __mmask64 ka, kb;
    masks(a + 2, a + kBytes + 2, &ka, &kb);
    acc0 = block<kBytes, kProducts>(a, s, i, ka, acc0);
    acc1 = block<kBytes, kProducts>(a + kBytes, s, i + 1, kb, acc1);
  }
  if (i < nb) {
    const uint8_t* a = w + static_cast<size_t>(i) * kBytes;
    acc0 = block<kBytes, kProducts>(a, s, i, mask(a + 2), acc0);
  }
  return hsum(_mm256_add_ps(acc0, acc1));
}

template <typename Block, __m256i (*kProducts)(const uint8_t*, __m256i)>
void dot_rows(int64_t n, const uint8_t* w, size_t w_stride, int64_t rows, const void* x, float* y);

template <typename Block, __m256i (*kProducts)(const uint8_t*, __m256i)>
float dot(int64_t n, const void* w, const void* x) {
  float y;
  dot_rows<Block, kProducts>(n, static_cast<const uint8_t*>(w), 0, 1, x, &y);
  return y;
}

template <typename Block, __m256i (*kProducts)(const uint8_t*, __m256i)>
void dot_rows(int64_t n, const uint8_t* w, size_t w_stride, int64_t rows, const void* x, float* y) {
  static thread_local Staged s;
  if (n > kMaxStaged) {
    // Rows longer than the staging area (none in today's models): the reference.
    for (int64_t r = 0; r < rows; ++r) y[r] = quant_dot<Block>(n, w + r * w_stride, x);
    return;
  }
  stage(n, static_cast<const uint8_t*>(x), s);
  for (int64_t r = 0; r < rows; ++r) y[r] = row_dot<sizeof(Block), kProducts>(n, w + r * w_stride, s);
}

// ---------------------------------------------------------------- expand_row

void expand_q8(const void* src, void* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ8_0S24*>(src);
  auto* o = static_cast<BlockQ8_0*>(dst);
  for (int64_t i = 0; i < n / kS24Block; ++i) {
    const __m512i v = _mm512_maskz_expand_epi8(mask(b[i].codes), _mm512_castsi256_si512(load256(b[i].qs)));
    o[2 * i].d = o[2 * i + 1].d = b[i].d;
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(o[2 * i].qs), _mm512_castsi512_si256(v));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(o[2 * i + 1].qs), _mm512_extracti64x4_epi64(v, 1));
  }
}

void expand_q4(const void* src, void* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ4_0S24*>(src);
  auto* o = static_cast<BlockQ4_0*>(dst);
  const __m128i m = _mm_set1_epi8(0x0f);
  for (int64_t i = 0; i < n / kS24Block; ++i) {
    const __m128i q = load128(b[i].qs);
    const __m256i levels = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), m), _mm_and_si128(q, m));
    // Dropped positions at level 8, zero.
    const __m512i v = _mm512_mask_expand_epi8(_mm512_set1_epi8(8), mask(b[i].codes), _mm512_castsi256_si512(levels));
    for (int h = 0; h < 2; ++h) {
      const __m256i l = h == 0 ? _mm512_castsi512_si256(v) : _mm512_extracti64x4_epi64(v, 1);
      // Q4_0: value j in the low nibble of qs[j], value j + 16 in the high nibble.
      const __m128i packed = _mm_or_si128(_mm256_castsi256_si128(l), _mm_slli_epi16(_mm256_extracti128_si256(l, 1), 4));
      o[2 * i + h].d = b[i].d;
      _mm_storeu_si128(reinterpret_cast<__m128i*>(o[2 * i + h].qs), packed);
    }
  }
}

}  // namespace

void register_sparse24_avx512(DType t, DotKernels& k) {
  if (t != DType::Q8_0_S24 && t != DType::Q4_0_S24) return;
  k.tile = s24_expanded_tile(t, SimdTarget::kAvx512);
  k.quantize_x = dot_kernels(DType::Q8_0, SimdTarget::kAvx512).quantize_x;
  if (!cpu_features().avx512vbmi || !cpu_features().avx512vbmi2) return;
  k.gemv_by_rows = true;
  if (t == DType::Q8_0_S24) {
    k.dot = dot<BlockQ8_0S24, q8_products>;
    k.dot_rows = dot_rows<BlockQ8_0S24, q8_products>;
    k.expand_row = expand_q8;
  } else {
    k.dot = dot<BlockQ4_0S24, q4_products>;
    k.dot_rows = dot_rows<BlockQ4_0S24, q4_products>;
    k.expand_row = expand_q4;
  }
}

}  // namespace pagoda::simd

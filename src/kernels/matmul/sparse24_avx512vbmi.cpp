// avx512 + VBMI + VBMI2 bodies of the 2:4 sparse formats (quant/sparse24.h). Registered
// only when the CPU has both (Ice Lake, Zen 4 and later); otherwise the avx2 bodies stay.
//
// dot_rows (decode's GEMV: matmul hands it a work item's rows, DotKernels::gemv_by_rows):
// the activations are staged once per call (their quants contiguous and 64-byte aligned,
// their scales as floats, and per group of four positions the correction below), then
// each row is streamed on its own, four blocks per step, prefetching ahead. Per block:
// - the keep mask: the 48-bit code field broadcast to every qword, each byte of qword L
//   cut to code L by one multishift, looked up in a 64-entry table of 8-bit keep masks by
//   one byte permute, and bit p % 8 of byte p tested: the 64-bit mask in one vptestmb (no
//   trip through a general register: extracting masks by vmovq / kmov cost more than the
//   rest of the block on Zen 5, and gathering eight blocks' masks at once was slower still);
// - the weights expanded to their 64 positions as unsigned levels (vpexpandb), the dropped
//   positions at the level that means zero (Q8: w + 128 and 128; Q4: the nibbles and 8);
// - one vpdpbusd of the levels with the 64 activation quants into an accumulator that
//   starts at the staged correction, -fill x the sum of each lane's four quants, so every
//   lane holds exactly the sum of its kept products (no second dpbusd for the offset);
// - lanes 0-7 and 8-15 scaled by their activation block's scale and the block's.
// This replaced compressing the activations under the mask (vpcompressb) and two dpbusd:
// 1.2-1.25x in cache on Zen 5 for both formats (docs/quantize.md). dot is dot_rows of
// one row.
//
// expand_row (prefill: matmul expands a thread's rows once per call and runs the dense
// tile): vpexpandb under the same mask puts the kept values back at their positions, the
// dropped ones at the level of zero; the bytes equal the scalar expand_row_*'s.
//
// Everything here has internal linkage and uses no std:: templates over shared types, so
// no AVX-512 copy of an inline function can be picked by the linker for code that runs on
// other CPUs.
#include "kernels/simd/simd_intrinsics.h"

#include <algorithm>

#include "base/cpu_features.h"
#include "kernels/matmul/packed_layout.h"
#include "kernels/matmul/packed_weights.h"
#include "kernels/matmul/simd_registry.h"
#include "kernels/matmul/sparse24_tile.h"
#include "kernels/simd/transpose_avx512.h"
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

struct alignas(64) Bytes64 {
  uint8_t v[64];
};
// Per byte p of a block's 64, the bit offset of its code (code p / 8) in the code field.
constexpr Bytes64 make_lane_cuts() {
  Bytes64 c{};
  for (int j = 0; j < 64; ++j) c.v[j] = static_cast<uint8_t>(6 * (j / 8));
  return c;
}
constexpr Bytes64 kLaneCuts = make_lane_cuts();
// Per byte p, the bit of its table byte that says whether position p is kept.
constexpr Bytes64 make_bits() {
  Bytes64 c{};
  for (int j = 0; j < 64; ++j) c.v[j] = static_cast<uint8_t>(1 << (j % 8));
  return c;
}
constexpr Bytes64 kBits = make_bits();

// The keep mask of one block from its code field (8 bytes read: a block continues past its
// 6 code bytes): byte p of qword L the code of positions 8L..8L+7, its table byte, bit p % 8.
inline __mmask64 keep_mask(const uint8_t* codes) {
  const __m512i c = _mm512_set1_epi64(static_cast<long long>(load64(codes)));
  const __m512i cut = _mm512_multishift_epi64_epi8(_mm512_load_si512(kLaneCuts.v), c);
  const __m512i m = _mm512_permutexvar_epi8(cut, _mm512_load_si512(kMaskTable.v));
  return _mm512_test_epi8_mask(m, _mm512_load_si512(kBits.v));
}

// Activations staged for a call, per 64-position block: the quants, their scales in the
// lanes of the block's sum (0-7 activation block 2i, 8-15 block 2i + 1), and per lane the
// correction for the level the dropped positions are expanded to (kFill x the sum of the
// lane's four activation quants, negated).
constexpr int64_t kMaxStaged = 32768;  // positions; longer rows take the unstaged loop
struct Staged {
  alignas(64) int8_t q[kMaxStaged];
  alignas(64) float d[kMaxStaged / kS24Block][16];
  alignas(64) int32_t bias[kMaxStaged / kS24Block][16];
};

template <int kFill>
void stage(int64_t n, const uint8_t* x, Staged& s) {
  const auto* xb = reinterpret_cast<const BlockQ8_0*>(x);
  for (int64_t b = 0; b < n / kQK; ++b) {
    const __m256i q = load256(xb[b].qs);
    _mm256_store_si256(reinterpret_cast<__m256i*>(s.q + b * kQK), q);
    // The sum of each group of four quants: dpbusd of ones with them.
    const __m256i sums = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(1), q);
    _mm256_store_si256(reinterpret_cast<__m256i*>(s.bias[b / 2] + 8 * (b % 2)),
                       _mm256_mullo_epi32(sums, _mm256_set1_epi32(-kFill)));
    _mm256_store_ps(s.d[b / 2] + 8 * (b % 2), _mm256_set1_ps(half(&xb[b].d)));
  }
}

// One block's 64 weights as unsigned bytes, the dropped positions at the level that means
// zero (Q8: w + 128, dropped 128; Q4: the nibble levels, dropped 8), under keep mask k.
inline __m512i q8_levels(const uint8_t* blk, __mmask64 k) {
  const __m256i u = _mm256_xor_si256(load256(blk + 8), _mm256_set1_epi8(-128));
  return _mm512_mask_expand_epi8(_mm512_set1_epi8(-128), k, _mm512_castsi256_si512(u));
}

inline __m512i q4_levels(const uint8_t* blk, __mmask64 k) {
  // Low nibbles are kept values 0-15, high nibbles 16-31: the 16 bytes in both lanes, the
  // upper lane shifted by 4.
  const __m256i q = _mm256_broadcastsi128_si256(load128(blk + 8));
  const __m256i l = _mm256_and_si256(_mm256_srlv_epi16(q, _mm256_set_epi64x(0x0004000400040004, 0x0004000400040004, 0, 0)),
                                     _mm256_set1_epi8(0x0f));
  return _mm512_mask_expand_epi8(_mm512_set1_epi8(8), k, _mm512_castsi256_si512(l));
}

// The FP16 scale at the start of a block, in every lane.
inline __m512 block_scale(const uint8_t* blk) {
  return _mm512_cvtph_ps(_mm256_set1_epi16(static_cast<short>(load16(blk))));
}

// How far ahead a row's stream is prefetched: 2 KB gave Gemma 3 270M's Q4_0_S24 decode
// 1.7x over none on two threads (its rows are 240-768 bytes, too short for the hardware
// prefetcher to ramp up within one).
constexpr int kAhead = 2048;

template <__m512i (*kLevels)(const uint8_t*, __mmask64)>
inline __m512 block(const uint8_t* blk, const Staged& s, int64_t i, __mmask64 k, __m512 acc) {
  const __m512i sum = _mm512_dpbusd_epi32(_mm512_load_si512(s.bias[i]), kLevels(blk, k),
                                          _mm512_load_si512(s.q + i * kS24Block));
  return _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_mul_ps(_mm512_load_ps(s.d[i]), block_scale(blk)), acc);
}

template <size_t kBytes, __m512i (*kLevels)(const uint8_t*, __mmask64)>
float row_dot(int64_t n, const uint8_t* w, const Staged& s) {
  const int64_t nb = n / kS24Block;
  // Four chains: the masks of four blocks are independent work the core overlaps.
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps(), acc2 = _mm512_setzero_ps(),
         acc3 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 4 <= nb; i += 4) {
    const uint8_t* a = w + static_cast<size_t>(i) * kBytes;
    _mm_prefetch(reinterpret_cast<const char*>(a) + kAhead, _MM_HINT_T0);
    if (4 * kBytes > 64) _mm_prefetch(reinterpret_cast<const char*>(a) + kAhead + 64, _MM_HINT_T0);
    if (4 * kBytes > 128) _mm_prefetch(reinterpret_cast<const char*>(a) + kAhead + 128, _MM_HINT_T0);
    const __mmask64 k0 = keep_mask(a + 2), k1 = keep_mask(a + kBytes + 2), k2 = keep_mask(a + 2 * kBytes + 2),
                    k3 = keep_mask(a + 3 * kBytes + 2);
    acc0 = block<kLevels>(a, s, i, k0, acc0);
    acc1 = block<kLevels>(a + kBytes, s, i + 1, k1, acc1);
    acc2 = block<kLevels>(a + 2 * kBytes, s, i + 2, k2, acc2);
    acc3 = block<kLevels>(a + 3 * kBytes, s, i + 3, k3, acc3);
  }
  acc0 = _mm512_add_ps(acc0, acc2);
  acc1 = _mm512_add_ps(acc1, acc3);
  for (; i + 2 <= nb; i += 2) {
    const uint8_t* a = w + static_cast<size_t>(i) * kBytes;
    acc0 = block<kLevels>(a, s, i, keep_mask(a + 2), acc0);
    acc1 = block<kLevels>(a + kBytes, s, i + 1, keep_mask(a + kBytes + 2), acc1);
  }
  if (i < nb) {
    const uint8_t* a = w + static_cast<size_t>(i) * kBytes;
    acc0 = block<kLevels>(a, s, i, keep_mask(a + 2), acc0);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
}

template <typename Block, int kFill, __m512i (*kLevels)(const uint8_t*, __mmask64)>
void dot_rows(int64_t n, const uint8_t* w, size_t w_stride, int64_t rows, const void* x, float* y) {
  static thread_local Staged s;
  if (n > kMaxStaged) {
    // Rows longer than the staging area (none in today's models): the reference.
    for (int64_t r = 0; r < rows; ++r) y[r] = quant_dot<Block>(n, w + r * w_stride, x);
    return;
  }
  stage<kFill>(n, static_cast<const uint8_t*>(x), s);
  for (int64_t r = 0; r < rows; ++r) y[r] = row_dot<sizeof(Block), kLevels>(n, w + r * w_stride, s);
}

template <typename Block, int kFill, __m512i (*kLevels)(const uint8_t*, __mmask64)>
float dot(int64_t n, const void* w, const void* x) {
  float y;
  dot_rows<Block, kFill, kLevels>(n, static_cast<const uint8_t*>(w), 0, 1, x, &y);
  return y;
}

// ---------------------------------------------------------------- expand_row

void expand_q8(const void* src, void* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ8_0S24*>(src);
  auto* o = static_cast<BlockQ8_0*>(dst);
  for (int64_t i = 0; i < n / kS24Block; ++i) {
    const __m512i v = _mm512_maskz_expand_epi8(keep_mask(b[i].codes), _mm512_castsi256_si512(load256(b[i].qs)));
    o[2 * i].d = o[2 * i + 1].d = b[i].d;
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(o[2 * i].qs), _mm512_castsi512_si256(v));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(o[2 * i + 1].qs), _mm512_extracti64x4_epi64(v, 1));
  }
}

// A Q4_0_S24 block's 64 positions as two Q4_0 blocks' 32 nibble bytes (value j in the low
// nibble of byte j, value j + 16 in its high nibble), dropped positions at level 8 (zero).
inline __m256i q4_dense_bytes(const BlockQ4_0S24& b) {
  const __m512i l = q4_levels(reinterpret_cast<const uint8_t*>(&b), keep_mask(b.codes));
  // 128-bit lanes of l: values 0-15, 16-31, 32-47, 48-63; lanes 0 and 2 | lanes 1 and 3 << 4.
  const __m512i hi = _mm512_slli_epi16(_mm512_shuffle_i32x4(l, l, 0xf5), 4);
  const __m512i both = _mm512_or_si512(l, hi);
  return _mm512_castsi512_si256(_mm512_shuffle_i32x4(both, both, 0x08));
}

void expand_q4(const void* src, void* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ4_0S24*>(src);
  auto* o = static_cast<BlockQ4_0*>(dst);
  for (int64_t i = 0; i < n / kS24Block; ++i) {
    const __m256i bytes = q4_dense_bytes(b[i]);
    o[2 * i].d = o[2 * i + 1].d = b[i].d;
    _mm_storeu_si128(reinterpret_cast<__m128i*>(o[2 * i].qs), _mm256_castsi256_si128(bytes));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(o[2 * i + 1].qs), _mm256_extracti128_si256(bytes, 1));
  }
}

// expand_panels: per panel and per run of sparse blocks that fills 16 dwords of a row
// (Q8: one sparse block, two dense blocks; Q4: two sparse blocks, four dense blocks), the
// 16 rows expanded into registers as the panel stores them (row_dwords: Q8 q ^ 0x80, Q4
// the dense nibble bytes), one 16 x 16 transpose, the registers stored where the dense
// blocks sit, each row's scale copied to both dense blocks of its sparse block.
template <typename Dense, typename Sparse, int kRun, __m512i (*kRowDwords)(const Sparse* b, int count)>
void expand_panels(const uint8_t* w, size_t w_stride, int64_t rows, int64_t n, uint8_t* out) {
  using L = packed::Layout<Dense>;
  const int64_t nb = n / kS24Block;
  const size_t panel_bytes = packed::panel_bytes<L>(2 * nb);
  for (int64_t p = 0; p * kPanelRows < rows; ++p) {
    const uint8_t* pw = w + static_cast<size_t>(p * kPanelRows) * w_stride;
    const int live = static_cast<int>(std::min<int64_t>(kPanelRows, rows - p * kPanelRows));
    uint8_t* panel = out + static_cast<size_t>(p) * panel_bytes;
    for (int64_t i = 0; i < nb; i += kRun) {
      const int count = static_cast<int>(std::min<int64_t>(kRun, nb - i));
      __m512i v[16];
      for (int r = 0; r < 16; ++r)  // rows past the matrix stay zero, as pack_panels leaves them
        v[r] = r < live ? kRowDwords(reinterpret_cast<const Sparse*>(pw + static_cast<size_t>(r) * w_stride) + i, count)
                        : _mm512_setzero_si512();
      transpose16_dwords(v);
      for (int h = 0; h < 2 * count; ++h) {
        uint8_t* dst = panel + packed::block_at<L>(2 * i + h);
        for (int j = 0; j < L::kRegs; ++j) _mm512_storeu_si512(dst + 64 * j, v[L::kRegs * h + j]);
        for (int r = 0; r < 16; ++r) {
          uint16_t d = 0;
          if (r < live) d = reinterpret_cast<const Sparse*>(pw + static_cast<size_t>(r) * w_stride)[i + h / 2].d;
          std::memcpy(dst + L::kScaleAt + 2 * r, &d, 2);
        }
      }
    }
  }
}

inline __m512i q8_row_dwords(const BlockQ8_0S24* b, int) {
  return _mm512_xor_si512(_mm512_maskz_expand_epi8(keep_mask(b->codes), _mm512_castsi256_si512(load256(b->qs))),
                          _mm512_set1_epi8(static_cast<char>(packed::Layout<BlockQ8_0>::kFlip)));
}

inline __m512i q4_row_dwords(const BlockQ4_0S24* b, int count) {
  const __m512i first = _mm512_castsi256_si512(q4_dense_bytes(b[0]));
  return count == 2 ? _mm512_inserti64x4(first, q4_dense_bytes(b[1]), 1) : first;
}

}  // namespace

void register_sparse24_avx512(DType t, DotKernels& k) {
  if (t != DType::Q8_0_S24 && t != DType::Q4_0_S24) return;
  k.tile = s24_expanded_tile(t, SimdTarget::kAvx512);
  k.quantize_x = dot_kernels(DType::Q8_0, SimdTarget::kAvx512).quantize_x;
  if (!cpu_features().avx512vbmi || !cpu_features().avx512vbmi2 || !cpu_features().avx512vnni) return;
  k.gemv_by_rows = true;
  if (t == DType::Q8_0_S24) {
    k.dot = dot<BlockQ8_0S24, 128, q8_levels>;
    k.dot_rows = dot_rows<BlockQ8_0S24, 128, q8_levels>;
    k.expand_row = expand_q8;
    k.expand_panels = expand_panels<BlockQ8_0, BlockQ8_0S24, 1, q8_row_dwords>;
  } else {
    k.dot = dot<BlockQ4_0S24, 8, q4_levels>;
    k.dot_rows = dot_rows<BlockQ4_0S24, 8, q4_levels>;
    k.expand_row = expand_q4;
    k.expand_panels = expand_panels<BlockQ4_0, BlockQ4_0S24, 2, q4_row_dwords>;
  }
}

}  // namespace pagoda::simd

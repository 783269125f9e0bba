// 2:4 structured sparsity: in every group of four consecutive weights of a row (four
// input channels), two are kept and two are exactly zero. The formats Q8_0_S24 and
// Q4_0_S24 (blocks.h) store a 64-position block as the dense format's block over its 32
// kept values plus eight 6-bit codes saying where they sit: 5.0 and 3.0 bits per weight
// against Q8_0's 8.5 and Q4_0's 4.5, so a bandwidth-bound decode reads 1.7x and 1.5x
// fewer bytes. A code covers two groups: each group keeps one of the six pairs of
// kS24Pairs, and the code is pair(2j) + 6 * pair(2j + 1).
//
// The selection and packing helpers here are the format's definition; the row functions
// (rows.h) and the SIMD kernels (kernels/matmul/sparse_*) build on them. Pure functions,
// thread-safe.
#pragma once

#include <cstdint>

#include "quant/blocks.h"
#include "tensor/dtype.h"

namespace pagoda {

inline constexpr bool is_sparse24(DType t) { return t == DType::Q8_0_S24 || t == DType::Q4_0_S24; }

// The six ways to keep two of four positions, as (first, second), first < second.
inline constexpr uint8_t kS24Pairs[6][2] = {{0, 1}, {0, 2}, {0, 3}, {1, 2}, {1, 3}, {2, 3}};

// A code's four positions, each within its group of four (0..3), two bits each from bit 0:
// group 2j's first and second, group 2j+1's first and second. Codes 36..63 name nothing
// a quantizer writes; they decode as code 0 so that damaged bytes give wrong values,
// never a read outside a table (every kernel decodes through this table).
inline constexpr uint8_t s24_code_positions(int code) {
  const int c = code < 36 ? code : 0;
  const auto* lo = kS24Pairs[c % 6];
  const auto* hi = kS24Pairs[c / 6];
  return static_cast<uint8_t>(lo[0] | lo[1] << 2 | hi[0] << 4 | hi[1] << 6);
}

// The 8 codes of a block (6 bytes) -> the position (0..63) of each of its 32 kept values.
void s24_positions(const uint8_t codes[6], uint8_t pos[kS24Kept]);

// keep[i] (0/1, two per group of four, in position order) for the 64 positions of a
// block -> its codes. False when a group does not keep exactly two.
bool s24_encode(const uint8_t keep[kS24Block], uint8_t codes[6]);

// Per group of four consecutive values of score[0..n) (n a multiple of 4), keep[i] = 1 for
// the two largest scores and 0 for the others; ties go to the lower position, NaN counts
// as the smallest. The rule every pruning method ends in (magnitude: |w|; Wanda:
// |w| x the input channel's activation norm).
void s24_select(const float* score, int64_t n, uint8_t* keep);

// Zeroes w[i] where keep[i] == 0.
void s24_apply(const uint8_t* keep, float* w, int64_t n);

// A row in a sparse format -> the same values in its dense counterpart (Q8_0_S24 ->
// Q8_0, Q4_0_S24 -> Q4_0): each block becomes two dense blocks with the same scale and
// the dropped positions at the level of zero. n positions, a multiple of kS24Block.
void expand_row_q8_0_s24(const void* src, void* dst_q8_0, int64_t n);
void expand_row_q4_0_s24(const void* src, void* dst_q4_0, int64_t n);

}  // namespace pagoda

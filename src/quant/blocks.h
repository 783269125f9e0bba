// Byte layouts of the block formats, field for field as GGUF stores them (little-endian,
// FP16 fields kept as raw uint16_t bits). The scalar references in src/quant/ and the SIMD
// kernels in src/kernels/ both read rows through these structs, so a layout is written
// down once. Each struct's size is checked against the dtype table (src/tensor/dtype.h).
// Rows handed to the quant functions must be aligned to alignof() of their block (2 bytes,
// 4 for Q8_K), which GGUF's 32-byte tensor alignment and our own buffers both give.
#pragma once

#include <cstdint>

namespace pagoda {

inline constexpr int kQK = 32;     // values per block of the legacy formats (Q4_0..Q8_1)
inline constexpr int kQK_K = 256;  // values per super-block of the K-quants
inline constexpr int kKScaleBytes = 12;  // packed 6-bit scales+mins of Q4_K/Q5_K

// x = d * (q - 8), q in 0..15; value j sits in the low nibble of qs[j], value j+16 in the
// high nibble of qs[j].
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[kQK / 2];
};

// x = d * q + m, q in 0..15, same nibble order as Q4_0.
struct BlockQ4_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qs[kQK / 2];
};

// x = d * (q - 16), q in 0..31: low 4 bits as in Q4_0, bit 4 of value j is bit j of qh.
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};

// x = d * q + m, q in 0..31, bits as in Q5_0.
struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};

// x = d * q, q in -127..127.
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kQK];
};

// Q8_0 plus s = d * sum(qs) (llama.cpp's activation format for Q4_1/Q5_1; we use Q8_0).
struct BlockQ8_1 {
  uint16_t d;
  uint16_t s;
  int8_t qs[kQK];
};

// 16 groups of 16 values; x = d * (scales[g] & 15) * q - dmin * (scales[g] >> 4), q in 0..3.
// qs byte l of half h (32 bytes each) holds values h*128 + l + 32*k in bits 2k..2k+1.
struct BlockQ2_K {
  uint8_t scales[kQK_K / 16];
  uint8_t qs[kQK_K / 4];
  uint16_t d;
  uint16_t dmin;
};

// 16 groups of 16; x = d * (s_g - 32) * (q - (high bit ? 0 : 4)), q's low 2 bits laid out as
// in Q2_K, the high bit of value e is bit e/32 of hmask[e%32], and the 6-bit group scales
// s_g are split into low nibbles (bytes 0..7) and 2-bit high parts (bytes 8..11).
struct BlockQ3_K {
  uint8_t hmask[kQK_K / 8];
  uint8_t qs[kQK_K / 4];
  uint8_t scales[12];
  uint16_t d;
};

// 8 groups of 32; x = d * sc_g * q - dmin * m_g, q in 0..15, with 6-bit sc/m packed in
// `scales` (see unpack_k4_scale_min in k_quants.h). Group 2c+s sits in nibble s of qs[32c..].
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qs[kQK_K / 2];
};

// Q4_K plus a fifth bit: bit g of qh[l] is the high bit of value l of group g.
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qh[kQK_K / 8];
  uint8_t qs[kQK_K / 2];
};

// 16 groups of 16; x = d * scales[g] * (q - 32), q in 0..63: low nibbles in ql, high two
// bits in qh (layout spelled out in k_dequant.cpp).
struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];
  uint8_t qh[kQK_K / 4];
  int8_t scales[kQK_K / 16];
  uint16_t d;
};

// Activations for K-quant dot products: x = d * q with an FP32 scale, plus the sums of
// each group of 16 quants so the "- min" terms of Q2_K/Q4_K/Q5_K need no pass over qs.
struct BlockQ8_K {
  float d;
  int8_t qs[kQK_K];
  int16_t bsums[kQK_K / 16];
};

// 2:4 sparse formats (sparse24.h): 64 positions of a row of which 32 are kept, two in
// each group of four. `codes` holds eight 6-bit codes, little-endian bit stream, code j
// naming which two of group 2j's four positions and which two of group 2j+1's are kept
// (kS24Pairs); qs holds the kept values in position order, as the dense block over them
// would: Q8_0's int8 quants, or Q4_0's nibbles (kept value k in the low nibble of qs[k],
// k + 16 in the high nibble). Dropped positions are exactly 0.
inline constexpr int kS24Block = 64;  // positions per block
inline constexpr int kS24Kept = 32;   // kept values per block
struct BlockQ8_0S24 {
  uint16_t d;
  uint8_t codes[6];
  int8_t qs[kS24Kept];
};

struct BlockQ4_0S24 {
  uint16_t d;
  uint8_t codes[6];
  uint8_t qs[kS24Kept / 2];
};

static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ8_1) == 36);
static_assert(sizeof(BlockQ2_K) == 84);
static_assert(sizeof(BlockQ3_K) == 110);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockQ8_K) == 292);
static_assert(sizeof(BlockQ8_0S24) == 40);
static_assert(sizeof(BlockQ4_0S24) == 24);

}  // namespace pagoda

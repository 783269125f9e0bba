// The W8A8 matmul kernels (format in src/quant/w8a8.h): int8 weights with a scale per
// row times int8 activations with a scale per token. Each output is one exact int32 dot
// over the whole row, scaled once, so every body equals the scalar reference bit for bit
// (tests/kernels/w8a8_simd_test.cpp). matmul() routes I8 weights here.
//
// The int8 products: AVX-512 VNNI's vpdpbusd multiplies unsigned by signed bytes, so the
// weights go in as u = w + 128 (w ^ 0x80) and -128 * sum(x) -- the token's quant sum,
// computed with its quants -- takes the offset back out, exactly, since int32 arithmetic
// wraps and only the final dot must fit. Without VNNI (AVX-512BW, AVX2) pmaddubsw's
// 16-bit pair sums could saturate with an offset, so the bodies multiply |w| by x with
// w's sign moved onto x (|w| <= 128, |x| <= 127: a pair sum stays below 2^15).
//
// Bodies are chosen at run time from the CPU features (PAGODA_CPU caps them too): one per
// SimdTarget, AVX-512 without VNNI (kAvx512Bw) included.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/simd/simd_target.h"

namespace pagoda {

// Tokens per block of the staged layout the tile bodies read (w8a8_stage_block).
inline constexpr int64_t kW8A8BlockTokens = 8;

// Quantized activations of a batch: token t's quants at q + t * stride (stride at least
// w8a8_act_stride(n), padding zeros as quantize_x writes them), its scale and quant sum,
// and for tile the same quants staged in blocks of 8 tokens: block b (tokens 8b..8b+7) at
// staged + b * 8 * w8a8_staged_dwords(n), written by w8a8_stage_block. gemv reads rows
// only and may get staged == nullptr.
struct W8A8Acts {
  const int8_t* q = nullptr;
  size_t stride = 0;
  const float* scale = nullptr;
  const int32_t* sum = nullptr;
  const int32_t* staged = nullptr;
};

// Dwords of one token in a staged block: its quants rounded up to 16 bytes.
int64_t w8a8_staged_dwords(int64_t n);
// Stages tokens [t0, t0 + count) of x's rows (count <= 8) as one block at `out`: dword j
// of token t0 + i at out[8 * j + i], zeros for i >= count; 8 * w8a8_staged_dwords(n)
// dwords. A tile body's register block then reads the 8 tokens' broadcasts of one step
// from one 32-byte line. Done once per matmul for all threads; blocks are independent.
void w8a8_stage_block(const W8A8Acts& x, int64_t t0, int64_t count, int64_t n, int32_t* out);

struct W8A8Kernels {
  // quantize_activation_w8a8: writes w8a8_act_stride(n) bytes at q and the quant sum,
  // returns the token's scale.
  float (*quantize_x)(const float* src, int64_t n, int8_t* q, int32_t* sum) = nullptr;
  // Decode: y[r] = w8a8_scale_output(dot(row r, token 0), w_scale[r], x.scale[0]) for
  // r < rows; row r of the weights at w + r * w_stride, n quants.
  void (*gemv)(int64_t n, const int8_t* w, size_t w_stride, const float* w_scale, int64_t rows, const W8A8Acts& x,
               float* y) = nullptr;
  // Prefill: y[t * y_stride + r] likewise for r < rows and every one of `tokens` tokens
  // (x.staged holding their blocks), in register blocks of rows x 8 tokens over weight
  // rows repacked once per call and 256 tokens. Writes nothing else in y.
  void (*tile)(int64_t n, const int8_t* w, size_t w_stride, const float* w_scale, int64_t rows, const W8A8Acts& x,
               int64_t tokens, float* y, size_t y_stride) = nullptr;
};

// The bodies of `target`, which must be runnable here; for tests and benchmarks.
W8A8Kernels w8a8_kernels(SimdTarget target);
// The best bodies for this machine; cached, thread-safe.
const W8A8Kernels& w8a8_kernels();

}  // namespace pagoda

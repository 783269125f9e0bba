// W8A8, a Pagoda weight format: int8 weights with one FP32 scale per output row, multiplied
// by int8 activations with one FP32 scale per token, quantized on the fly at every matmul.
// A whole row's dot product is summed exactly in int32 and scaled once, where Q8_0 scales
// every block of 32; that is what makes its prefill faster on CPUs with int8 dot
// instructions (AVX-512 VNNI).
//
// In a GGUF file a W8A8 matrix is two tensors: the quants as an I8 tensor under the usual
// name (`blk.0.attn_q.weight`, shape [cols, rows]) and its row scales as an F32 tensor of
// shape [rows] named with kW8A8ScaleSuffix (`blk.0.attn_q.weight.scale`); the file carries
// kW8A8FormatKey = kW8A8FormatName. Only Pagoda reads this: llama.cpp cannot load it.
//
// These are the scalar references; the SIMD kernels (src/kernels/matmul/w8a8_kernels.h) must
// match them bit for bit, which they can because the integer sums are exact. Pure
// functions, thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace pagoda {

inline constexpr std::string_view kW8A8FormatName = "W8A8";
inline constexpr std::string_view kW8A8FormatKey = "pagoda.weight_format";
inline constexpr std::string_view kW8A8ScaleSuffix = ".scale";

// Widest row whose exact dot product fits int32 (127 * 127 * n < 2^31); loaders reject
// wider W8A8 matrices.
inline constexpr int64_t kW8A8MaxCols = 131072;

// Weights: symmetric round to nearest, scale = amax / 127, quants in -127..127 (an
// all-zero row gets scale 0). Writes n quants and returns the row's scale. For
// `pagoda quantize` and the model generator.
float quantize_row_w8a8(const float* src, int8_t* dst, int64_t n);
void dequantize_row_w8a8(const int8_t* q, float scale, float* dst, int64_t n);

// Activations, one token per row: the same symmetric rounding (ties to even, as llama.cpp's
// activation conversion), quants in -127..127, plus their sum, which the kernels need for
// the unsigned-operand trick (see w8a8_kernels.h). A row takes w8a8_act_stride(n) bytes:
// the quants, then zeros up to a multiple of 64 bytes, which kernels may read as padding.
size_t w8a8_act_stride(int64_t n);
float quantize_activation_w8a8(const float* src, int64_t n, int8_t* q, int32_t* sum);

// The exact integer dot of a weight row and an activation row, n <= kW8A8MaxCols.
int32_t dot_w8a8_int(const int8_t* w, const int8_t* x, int64_t n);
// One output: the integer dot scaled as every kernel scales it, isum * (w_scale * x_scale).
inline float w8a8_scale_output(int32_t isum, float w_scale, float x_scale) {
  return static_cast<float>(isum) * (w_scale * x_scale);
}

}  // namespace pagoda

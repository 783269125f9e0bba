// The per-format row functions behind formats.h, one set per file (convert_float.cpp,
// q_legacy.cpp, k_dequant.cpp, k_quantize.cpp, k_dot.cpp), declared here so formats.cpp
// can dispatch and tests can call a format directly. All share the preconditions of
// formats.h: n is a multiple of the format's block size, rows are block-aligned (blocks.h),
// and quantized buffers are little-endian GGUF bytes. Source and destination never
// overlap (the definitions mark them __restrict so the loops vectorize).
#pragma once

#include <cstdint>

namespace pagoda::quant {

// Plain element types. The dots accumulate in double, as ggml's scalar path does
// (ggml_float), with each product rounded to float first.
void dequantize_row_f32(const void* src, float* dst, int64_t n);
void dequantize_row_f16(const void* src, float* dst, int64_t n);
void dequantize_row_bf16(const void* src, float* dst, int64_t n);
void quantize_row_f32(const float* src, void* dst, int64_t n);
void quantize_row_f16(const float* src, void* dst, int64_t n);
void quantize_row_bf16(const float* src, void* dst, int64_t n);
float vec_dot_f32(int64_t n, const void* w, const void* x);
float vec_dot_f16(int64_t n, const void* w, const void* x);
float vec_dot_bf16(int64_t n, const void* w, const void* x);

// 32-value formats; every dot takes Q8_0 activations.
void dequantize_row_q4_0(const void* src, float* dst, int64_t n);
void dequantize_row_q4_1(const void* src, float* dst, int64_t n);
void dequantize_row_q5_0(const void* src, float* dst, int64_t n);
void dequantize_row_q5_1(const void* src, float* dst, int64_t n);
void dequantize_row_q8_0(const void* src, float* dst, int64_t n);
void quantize_row_q4_0(const float* src, void* dst, int64_t n);
void quantize_row_q4_1(const float* src, void* dst, int64_t n);
void quantize_row_q5_0(const float* src, void* dst, int64_t n);
void quantize_row_q5_1(const float* src, void* dst, int64_t n);
void quantize_row_q8_0(const float* src, void* dst, int64_t n);
void quantize_row_q8_0_activation(const float* src, void* dst, int64_t n);
float vec_dot_q4_0_q8_0(int64_t n, const void* w, const void* x);
float vec_dot_q4_1_q8_0(int64_t n, const void* w, const void* x);
float vec_dot_q5_0_q8_0(int64_t n, const void* w, const void* x);
float vec_dot_q5_1_q8_0(int64_t n, const void* w, const void* x);
float vec_dot_q8_0_q8_0(int64_t n, const void* w, const void* x);

// 2:4 sparse (64-position blocks, sparse24.h); dots take Q8_0 activations and equal the
// dense format's dot of the expanded row bit for bit.
void dequantize_row_q8_0_s24(const void* src, float* dst, int64_t n);
void dequantize_row_q4_0_s24(const void* src, float* dst, int64_t n);
void quantize_row_q8_0_s24(const float* src, void* dst, int64_t n);
void quantize_row_q4_0_s24(const float* src, void* dst, int64_t n);
float vec_dot_q8_0_s24_q8_0(int64_t n, const void* w, const void* x);
float vec_dot_q4_0_s24_q8_0(int64_t n, const void* w, const void* x);

// K-quants (256-value super-blocks); every dot takes Q8_K activations.
void dequantize_row_q2_K(const void* src, float* dst, int64_t n);
void dequantize_row_q3_K(const void* src, float* dst, int64_t n);
void dequantize_row_q4_K(const void* src, float* dst, int64_t n);
void dequantize_row_q5_K(const void* src, float* dst, int64_t n);
void dequantize_row_q6_K(const void* src, float* dst, int64_t n);
void dequantize_row_q8_K(const void* src, float* dst, int64_t n);
void quantize_row_q2_K(const float* src, void* dst, int64_t n);
void quantize_row_q3_K(const float* src, void* dst, int64_t n);
void quantize_row_q4_K(const float* src, void* dst, int64_t n);
void quantize_row_q5_K(const float* src, void* dst, int64_t n);
void quantize_row_q6_K(const float* src, void* dst, int64_t n);
void quantize_row_q8_K(const float* src, void* dst, int64_t n);
float vec_dot_q2_K_q8_K(int64_t n, const void* w, const void* x);
float vec_dot_q3_K_q8_K(int64_t n, const void* w, const void* x);
float vec_dot_q4_K_q8_K(int64_t n, const void* w, const void* x);
float vec_dot_q5_K_q8_K(int64_t n, const void* w, const void* x);
float vec_dot_q6_K_q8_K(int64_t n, const void* w, const void* x);
float vec_dot_q8_K_q8_K(int64_t n, const void* w, const void* x);

}  // namespace pagoda::quant

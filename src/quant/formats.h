// Arithmetic of the weight formats: dequantize, quantize (round-to-nearest reference) and
// the scalar dot product of a weight row with an activation row. These are the scalar
// references every SIMD kernel is tested against. Dequantize matches the `gguf` Python
// package bit for bit. As in llama.cpp, a quantized weight row is dotted with an
// activation row converted to the weight format's "vec-dot type" (Q8_0 for the 32-value
// formats, Q8_K for K-quants, F16 for F16, BF16 for BF16, F32 for F32), which keeps the
// dot in integers and makes our logits track llama.cpp's closely.
#pragma once

#include <cstdint>

#include "tensor/dtype.h"

namespace pagoda {

// Preconditions of the row functions below (checked by assert only, since they sit in
// the innermost loops): the type has the operation (can_dequantize / can_quantize; vec_dot
// needs can_dequantize), n is a multiple of the type's block size (callers validate
// tensor shapes when loading, e.g. with dtype_info(t).block_size), and buffers are
// aligned to their block struct (src/quant/blocks.h). Pure functions, thread-safe.
bool can_dequantize(DType t);
bool can_quantize(DType t);

// dst[0..n) = values of the row; n must be a multiple of the block size.
void dequantize_row(DType t, const void* src, float* dst, int64_t n);

// Encodes n floats as type t (round to nearest, llama.cpp's reference quantizers).
void quantize_row(DType t, const float* src, void* dst, int64_t n);

// Converts activations to a vec-dot type the way llama.cpp's x86 kernels do at run time
// (Q8_0: reciprocal scale 127/amax, ties to even). Differs from quantize_row only in
// rounding details; use it for activations, quantize_row for weights.
void quantize_activation_row(DType t, const float* src, void* dst, int64_t n);

// The format activations are converted to before vec_dot with weights of type t.
DType vec_dot_type(DType t);

// Sum over the row of w[i] * x[i]; w has type t, x has type vec_dot_type(t), both n long.
// Quantized formats sum each block exactly in integers and scale once per block; F32,
// F16 and BF16 accumulate in double (as ggml's scalar path) and round once at the end.
float vec_dot(DType t, int64_t n, const void* w, const void* x);

}  // namespace pagoda

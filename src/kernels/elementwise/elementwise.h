// Row-wise kernels of the transformer layers: RMSNorm, LayerNorm, activations, softmax,
// residual adds. Numerics follow ggml's (the norms sum in double, GELU is the tanh
// approximation tabulated over FP16 inputs) so results track llama.cpp. Each has a scalar
// body (elementwise.cpp) and one SIMD body (elementwise_body.h, over the vector layer)
// compiled per target and picked once for this CPU. Pure functions of their inputs,
// thread-safe, no allocation.
//
// What the SIMD bodies may change: the order of rms_norm's, layer_norm's and softmax's
// double sums; swiglu's exp (vexp.h's exp_fast, within 1 ulp of glibc's expf, so SwiGLU
// outputs are within 4 ulp of the scalar body). Everything else is bit-identical to the
// scalar body: the per-element float operations run in the same order, geglu and gelu
// look up the same table, softmax and exp_inplace use the vector exp that returns libm's expf
// bit for bit, softcap_inplace the vector tanh that returns softcap()'s bits.
#pragma once

#include <cstdint>

#include "kernels/simd/simd_target.h"

namespace pagoda {

// out = x / sqrt(mean(x^2) + eps) * w   (w may be null: no scale). out may alias x.
void rms_norm(const float* x, const float* w, int64_t n, float eps, float* out);
// LayerNorm as ggml's norm followed by the weight and the bias (StarCoder2): the mean is
// the double sum of x rounded to float over n, the variance the double sum of the float
// squares of (x - mean) over n, and out = (x - mean) * (1 / sqrt(variance + eps)) * w + b,
// each step rounded to float in that order (w, b may be null: not applied). out may alias x.
void layer_norm(const float* x, const float* w, const float* b, int64_t n, float eps, float* out);

// a[i] = silu(a[i]) * b[i]   (SwiGLU, gate in a)
void swiglu(float* a, const float* b, int64_t n);
// a[i] = gelu(a[i]) * b[i]   (GeGLU), GELU evaluated as gelu_fp16_table.
void geglu(float* a, const float* b, int64_t n);
// a[i] = gelu_fp16_table(a[i]): the ungated GELU of an MLP without a gate (StarCoder2).
void gelu_inplace(float* a, int64_t n);
// Exact tanh-approximation GELU.
float gelu_tanh(float x);
// gelu_tanh of x rounded to FP16, rounded to FP16 (ggml's GELU); identity above 10 and
// zero below -10.
float gelu_fp16_table(float x);

// In-place softmax over n values; returns nothing. Max-subtracted for stability.
void softmax(float* x, int64_t n);
// A row's log normalizer without writing it: log sum_i e^x[i], computed as max + log of
// the double sum of e^(x[i] - max); -inf when every value is -inf (or n is 0), NaN when
// any is NaN. *argmax (may be null) gets the first index of the largest value (0 when
// none is larger than -inf). For a vocabulary-wide row of logits (262k for Gemma) scored
// at every position, as perplexity and prompt compression do. The SIMD bodies use the
// 1-ulp exp_fast and sum in float lanes per 256 values, so they agree with the scalar
// body to about 1e-6 relative in the sum, 1e-6 absolute in the log.
double log_sum_exp_row(const float* x, int64_t n, int32_t* argmax);

void add_inplace(float* a, const float* b, int64_t n);
void scale_inplace(float* a, float s, int64_t n);
// x[i] = std::exp(x[i]), bit for bit, in vectors where the CPU has them.
void exp_inplace(float* x, int64_t n);
// Soft-capping (Gemma 2's attention scores and logits): cap * tanh(x / cap) computed as
// llama.cpp does (x times the float 1 / cap, tanh, times cap), with the correctly rounded
// tanh (libm's double tanh rounded to float; ggml's tanhf is within 2 ulp of it). cap > 0.
float softcap(float x, float cap);
// x[i] = softcap(x[i], cap), bit for bit, in vectors where the CPU has them.
void softcap_inplace(float* x, float cap, int64_t n);

// The bodies behind the functions above for one SIMD target (which must be runnable
// here); members a target does not implement are the next lower target's. For tests and
// benchmarks.
struct ElementwiseKernels {
  void (*rms_norm)(const float* x, const float* w, int64_t n, float eps, float* out) = nullptr;
  void (*layer_norm)(const float* x, const float* w, const float* b, int64_t n, float eps, float* out) = nullptr;
  void (*swiglu)(float* a, const float* b, int64_t n) = nullptr;
  void (*geglu)(float* a, const float* b, int64_t n) = nullptr;
  void (*gelu)(float* a, int64_t n) = nullptr;
  void (*softmax)(float* x, int64_t n) = nullptr;
  double (*log_sum_exp)(const float* x, int64_t n, int32_t* argmax) = nullptr;
  void (*add)(float* a, const float* b, int64_t n) = nullptr;
  void (*scale)(float* a, float s, int64_t n) = nullptr;
  void (*exp)(float* x, int64_t n) = nullptr;
  void (*softcap)(float* x, float cap, int64_t n) = nullptr;
};
ElementwiseKernels elementwise_kernels(SimdTarget target);

// Internal, for the SIMD geglu and gelu bodies: ggml's GELU table, the FP16 result for every FP16
// input bit pattern, plus two spare entries so a 32-bit gather at index 65535 stays inside.
const uint16_t* gelu_fp16_table_data();

}  // namespace pagoda

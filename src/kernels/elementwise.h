// Row-wise kernels of the transformer layers: RMSNorm, activations, softmax, residual
// adds. Scalar loops written so the compiler vectorizes them; numerics follow ggml's
// (RMSNorm sums float squares in double, GELU is the tanh approximation tabulated over FP16
// inputs) so results track llama.cpp.
#pragma once

#include <cstdint>

namespace pagoda {

// out = x / sqrt(mean(x^2) + eps) * w   (w may be null: no scale). out may alias x.
void rms_norm(const float* x, const float* w, int64_t n, float eps, float* out);

// a[i] = silu(a[i]) * b[i]   (SwiGLU, gate in a)
void swiglu(float* a, const float* b, int64_t n);
// a[i] = gelu(a[i]) * b[i]   (GeGLU), GELU evaluated as gelu_fp16_table.
void geglu(float* a, const float* b, int64_t n);
// Exact tanh-approximation GELU.
float gelu_tanh(float x);
// gelu_tanh of x rounded to FP16, rounded to FP16 (ggml's GELU); identity above 10 and
// zero below -10.
float gelu_fp16_table(float x);

// In-place softmax over n values; returns nothing. Max-subtracted for stability.
void softmax(float* x, int64_t n);

void add_inplace(float* a, const float* b, int64_t n);
void scale_inplace(float* a, float s, int64_t n);

}  // namespace pagoda

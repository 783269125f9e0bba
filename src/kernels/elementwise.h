// Row-wise kernels of the transformer layers: RMSNorm, activations, softmax, residual
// adds. Scalar loops written so the compiler vectorizes them; numerics follow ggml's
// (RMSNorm sums in double, GELU uses the tanh approximation) so results track llama.cpp.
#pragma once

#include <cstdint>

namespace pagoda {

// out = x / sqrt(mean(x^2) + eps) * w   (w may be null: no scale). out may alias x.
void rms_norm(const float* x, const float* w, int64_t n, float eps, float* out);

// a[i] = silu(a[i]) * b[i]   (SwiGLU, gate in a)
void swiglu(float* a, const float* b, int64_t n);
// a[i] = gelu_tanh(a[i]) * b[i]   (GeGLU)
void geglu(float* a, const float* b, int64_t n);
float gelu_tanh(float x);

// In-place softmax over n values; returns nothing. Max-subtracted for stability.
void softmax(float* x, int64_t n);

void add_inplace(float* a, const float* b, int64_t n);
void scale_inplace(float* a, float s, int64_t n);

}  // namespace pagoda

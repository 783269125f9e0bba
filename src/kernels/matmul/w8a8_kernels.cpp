#include "kernels/matmul/w8a8_kernels.h"

#include <cstring>

#include "kernels/matmul/w8a8_bodies.h"
#include "quant/w8a8.h"

namespace pagoda {
namespace {

void scalar_gemv(int64_t n, const int8_t* w, size_t w_stride, const float* w_scale, int64_t rows, const W8A8Acts& x,
                 float* y) {
  for (int64_t r = 0; r < rows; ++r)
    y[r] = w8a8_scale_output(dot_w8a8_int(w + r * w_stride, x.q, n), w_scale[r], x.scale[0]);
}

void scalar_tile(int64_t n, const int8_t* w, size_t w_stride, const float* w_scale, int64_t rows, const W8A8Acts& x,
                 int64_t tokens, float* y, size_t y_stride) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t t = 0; t < tokens; ++t)
      y[t * y_stride + r] =
          w8a8_scale_output(dot_w8a8_int(w + r * w_stride, x.q + t * x.stride, n), w_scale[r], x.scale[t]);
}

}  // namespace

int64_t w8a8_staged_dwords(int64_t n) { return 4 * ((n + 15) / 16); }

void w8a8_stage_block(const W8A8Acts& x, int64_t t0, int64_t count, int64_t n, int32_t* out) {
  const int64_t nj = w8a8_staged_dwords(n);
  for (int64_t i = 0; i < kW8A8BlockTokens; ++i) {
    if (i < count) {
      // Inside the zero-padded row: nj dwords never pass w8a8_act_stride(n).
      const int8_t* row = x.q + (t0 + i) * static_cast<int64_t>(x.stride);
      for (int64_t j = 0; j < nj; ++j) std::memcpy(out + j * kW8A8BlockTokens + i, row + 4 * j, 4);
    } else {
      for (int64_t j = 0; j < nj; ++j) out[j * kW8A8BlockTokens + i] = 0;
    }
  }
}

W8A8Kernels w8a8_kernels(SimdTarget target) {
  W8A8Kernels k;
  k.quantize_x = quantize_activation_w8a8;
  k.gemv = scalar_gemv;
  k.tile = scalar_tile;
  switch (target) {
    case SimdTarget::kAvx2: simd::w8a8_avx2(k); break;
    case SimdTarget::kAvx512Bw: simd::w8a8_avx512bw(k); break;
    case SimdTarget::kAvx512: simd::w8a8_avx512vnni(k); break;
    case SimdTarget::kScalar: break;
  }
  return k;
}

const W8A8Kernels& w8a8_kernels() {
  static const W8A8Kernels best = w8a8_kernels(best_simd_target());
  return best;
}

}  // namespace pagoda

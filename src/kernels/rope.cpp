#include "kernels/rope.h"

#include <cmath>

namespace pagoda {

void rope_apply(float* x, int32_t n_heads, int32_t head_dim, int32_t pos, const RopeParams& p) {
  const int32_t half = p.rot_dims / 2;
  // theta_i = pos * base^(-2i/rot), computed by repeated multiplication as ggml does so
  // the rounding of the angles matches.
  const float theta_scale = std::pow(p.freq_base, -2.0f / static_cast<float>(p.rot_dims));
  for (int32_t h = 0; h < n_heads; ++h) {
    float* v = x + static_cast<int64_t>(h) * head_dim;
    float theta = static_cast<float>(pos) * p.freq_scale;
    for (int32_t i = 0; i < half; ++i) {
      const float c = std::cos(theta);
      const float s = std::sin(theta);
      const int32_t i0 = p.layout == RopeLayout::kNorm ? 2 * i : i;
      const int32_t i1 = p.layout == RopeLayout::kNorm ? 2 * i + 1 : i + half;
      const float a = v[i0];
      const float b = v[i1];
      v[i0] = a * c - b * s;
      v[i1] = a * s + b * c;
      theta *= theta_scale;
    }
  }
}

}  // namespace pagoda

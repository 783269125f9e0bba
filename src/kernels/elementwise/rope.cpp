#include "kernels/elementwise/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

namespace pagoda {

void rope_yarn_corr_dims(int32_t n_dims, int32_t n_ctx_orig, float freq_base, float beta_fast, float beta_slow,
                         float dims[2]) {
  // The pair index whose wavelength fits n_rot rotations into n_ctx_orig positions.
  auto corr_dim = [&](float n_rot) {
    return static_cast<float>(n_dims) *
           std::log(static_cast<float>(n_ctx_orig) / (n_rot * 2 * static_cast<float>(std::numbers::pi))) /
           (2 * std::log(freq_base));
  };
  const float start = std::floor(corr_dim(beta_fast));
  const float end = std::ceil(corr_dim(beta_slow));
  dims[0] = std::max(0.0f, start);
  dims[1] = std::min(static_cast<float>(n_dims - 1), end);
}

void rope_apply(float* x, int32_t n_heads, int32_t head_dim, int32_t pos, const RopeParams& p) {
  rope_apply(x, n_heads, nullptr, 0, head_dim, pos, p);
}

void rope_apply(float* q, int32_t n_q_heads, float* k, int32_t n_k_heads, int32_t head_dim, int32_t pos,
                const RopeParams& p) {
  const int32_t half = p.rot_dims / 2;
  // The angles depend only on the position: compute them once for all heads.
  // theta_i = freq_scale * (pos * base^(-2i/rot) / factor_i), the power by repeated
  // multiplication, as ggml does so the rounding of the angles matches.
  thread_local std::vector<float> cs;
  cs.resize(2 * static_cast<size_t>(half));
  const float theta_scale = std::pow(p.freq_base, -2.0f / static_cast<float>(p.rot_dims));
  float theta_base = static_cast<float>(pos);
  float mscale = p.attn_factor;
  if (p.ext_factor != 0.0f) mscale *= 1.0f + 0.1f * std::log(1.0f / p.freq_scale);
  for (int32_t i = 0; i < half; ++i) {
    const float theta_extrap = p.freq_factors != nullptr ? theta_base / p.freq_factors[i] : theta_base;
    const float theta_interp = p.freq_scale * theta_extrap;
    float theta = theta_interp;
    if (p.ext_factor != 0.0f) {
      const float y = (static_cast<float>(i) - p.corr_dims[0]) / std::max(0.001f, p.corr_dims[1] - p.corr_dims[0]);
      const float ramp_mix = (1.0f - std::min(1.0f, std::max(0.0f, y))) * p.ext_factor;
      theta = theta_interp * (1.0f - ramp_mix) + theta_extrap * ramp_mix;
    }
    cs[2 * i] = std::cos(theta) * mscale;
    cs[2 * i + 1] = std::sin(theta) * mscale;
    theta_base *= theta_scale;
  }
  const bool norm = p.layout == RopeLayout::kNorm;
  const int32_t n_heads = n_q_heads + (k != nullptr ? n_k_heads : 0);
  for (int32_t h = 0; h < n_heads; ++h) {
    float* v = h < n_q_heads ? q + static_cast<int64_t>(h) * head_dim
                             : k + static_cast<int64_t>(h - n_q_heads) * head_dim;
    for (int32_t i = 0; i < half; ++i) {
      const int32_t i0 = norm ? 2 * i : i;
      const int32_t i1 = norm ? 2 * i + 1 : i + half;
      const float a = v[i0];
      const float b = v[i1];
      v[i0] = a * cs[2 * i] - b * cs[2 * i + 1];
      v[i1] = a * cs[2 * i + 1] + b * cs[2 * i];
    }
  }
}

}  // namespace pagoda

// Round-to-nearest quantizers of the K-quants and of Q8_K, following llama.cpp's
// quantize_row_*_ref (no importance matrix): each group of 16 or 32 values gets a
// least-squares scale (and min), the group scales are themselves quantized to 4, 6 or 8
// bits against one FP16 super-block scale, and finally every value is re-rounded
// against the scale it will actually be decoded with. The search steps and the float
// operation order follow llama.cpp so the bytes match what its quantizer would write.
#include "quant/scalar_math.h"

#include <cmath>
#include <cstring>

#include "quant/k_unpack.h"
#include "quant/level_pack.h"
#include "quant/rows.h"

namespace pagoda::quant {
namespace {

constexpr float kGroupMaxEps = 1e-15f;  // below this a group counts as all zero

inline int clamp_int(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

// Symmetric fit x ~ scale * (L - nmax), L in 0..2*nmax-1, minimizing the x^2-weighted
// squared error: start from the scale that puts the largest |x| on -nmax, then try 18
// nearby scales and keep the best (llama.cpp's make_qx_quants, rmse_type 1, no weights).
float fit_symmetric(int n, int nmax, const float* x, int8_t* L) {
  float max = 0.0f;
  float amax = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.0f;
  }
  float iscale = static_cast<float>(-nmax) / max;
  float sumlx = 0.0f;
  float suml2 = 0.0f;
  for (int i = 0; i < n; ++i) {
    const int l = clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1);
    L[i] = static_cast<int8_t>(l + nmax);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * static_cast<float>(l);
    suml2 += w * static_cast<float>(l) * static_cast<float>(l);
  }
  float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(is)) / max;
    sumlx = 0.0f;
    suml2 = 0.0f;
    for (int i = 0; i < n; ++i) {
      const int l = clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1);
      const float w = x[i] * x[i];
      sumlx += w * x[i] * static_cast<float>(l);
      suml2 += w * static_cast<float>(l) * static_cast<float>(l);
    }
    if (suml2 > 0.0f && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) {
        L[i] = static_cast<int8_t>(nmax + clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1));
      }
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// Q3_K's variant (make_q3_quants with rmse): one symmetric start, then up to 5 sweeps that
// move single values to the level that most improves the x^2-weighted fit. L ends in 0..7.
float fit_symmetric_q3(const float* x, int8_t* L) {
  constexpr int n = 16;
  constexpr int nmax = 4;
  float max = 0.0f;
  float amax = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.0f;
  }
  const float iscale = static_cast<float>(-nmax) / max;
  float sumlx = 0.0f;
  float suml2 = 0.0f;
  for (int i = 0; i < n; ++i) {
    const int l = clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1);
    L[i] = static_cast<int8_t>(l);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * static_cast<float>(l);
    suml2 += w * static_cast<float>(l) * static_cast<float>(l);
  }
  for (int itry = 0; itry < 5; ++itry) {
    int changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i];
      float slx = sumlx - w * x[i] * static_cast<float>(L[i]);
      if (slx > 0.0f) {
        float sl2 = suml2 - w * static_cast<float>(L[i]) * static_cast<float>(L[i]);
        const int new_l = clamp_int(nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
        if (new_l != L[i]) {
          slx += w * x[i] * static_cast<float>(new_l);
          sl2 += w * static_cast<float>(new_l) * static_cast<float>(new_l);
          if (sl2 > 0.0f && slx * slx * suml2 > sumlx * sumlx * sl2) {
            L[i] = static_cast<int8_t>(new_l);
            sumlx = slx;
            suml2 = sl2;
            ++changed;
          }
        }
      }
    }
    if (changed == 0) break;
  }
  for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(L[i] + nmax);
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

// Affine fit x ~ scale * L - the_min, L in 0..nmax, the_min >= 0, minimizing the weighted
// squared (or absolute, use_mad) error: start from the min/max fit, then solve weighted
// least squares for scale and min at nstep+1 rounding grids iscale = (nmax + rmin +
// rdelta*k) / range and keep the best (llama.cpp's make_qkx2_quants). As there, the
// running best min also moves the next grid's origin.
float fit_affine(int n, int nmax, const float* x, const float* weights, uint8_t* L, float* the_min,
                 float rmin, float rdelta, int nstep, bool use_mad) {
  float min = x[0];
  float max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    const float w = weights[i];
    sum_w += w;
    sum_x += w * x[i];
  }
  if (min > 0.0f) min = 0.0f;
  if (max == min) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    *the_min = -min;
    return 0.0f;
  }
  float iscale = static_cast<float>(nmax) / (max - min);
  float scale = 1.0f / iscale;
  float best_error = 0.0f;
  for (int i = 0; i < n; ++i) {
    L[i] = static_cast<uint8_t>(clamp_int(nearest_int(iscale * (x[i] - min)), 0, nmax));
    float diff = scale * static_cast<float>(L[i]) + min - x[i];
    diff = use_mad ? std::fabs(diff) : diff * diff;
    best_error += weights[i] * diff;
  }
  uint8_t aux[32];
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * static_cast<float>(is) + static_cast<float>(nmax)) / (max - min);
    float sum_l = 0.0f;
    float sum_l2 = 0.0f;
    float sum_xl = 0.0f;
    for (int i = 0; i < n; ++i) {
      const int l = clamp_int(nearest_int(iscale * (x[i] - min)), 0, nmax);
      aux[i] = static_cast<uint8_t>(l);
      const float wl = weights[i] * static_cast<float>(l);
      sum_l += wl;
      sum_l2 += wl * static_cast<float>(l);
      sum_xl += wl * x[i];
    }
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (det > 0.0f) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
      if (this_min > 0.0f) {
        this_min = 0.0f;
        this_scale = sum_xl / sum_l2;
      }
      float error = 0.0f;
      for (int i = 0; i < n; ++i) {
        float diff = this_scale * static_cast<float>(aux[i]) + this_min - x[i];
        diff = use_mad ? std::fabs(diff) : diff * diff;
        error += weights[i] * diff;
      }
      if (error < best_error) {
        for (int i = 0; i < n; ++i) L[i] = aux[i];
        best_error = error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *the_min = -min;
  return scale;
}

// Scales and mins of the 8 groups of Q4_K/Q5_K, 6 bits each (see unpack_k4_scale_min).
inline void pack_k4_scale_min(const uint8_t* ls, const uint8_t* lm, uint8_t* s) {
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      s[j] = ls[j];
      s[j + 4] = lm[j];
    } else {
      s[j + 4] = static_cast<uint8_t>((ls[j] & 0x0f) | ((lm[j] & 0x0f) << 4));
      s[j - 4] = static_cast<uint8_t>(s[j - 4] | ((ls[j] >> 4) << 6));
      s[j] = static_cast<uint8_t>(s[j] | ((lm[j] >> 4) << 6));
    }
  }
}

// Shared by Q4_K (nmax 15) and Q5_K (nmax 31): per-group affine fits weighted by
// rms(x) + |x|, 6-bit group scales and mins, then every value re-rounded against the
// decoded scale and min. L receives the final levels.
template <typename Block>
void quantize_k4_style(const float* x, Block* y, int nmax, float rmin, float rdelta, int nstep, uint8_t* L) {
  float scales[8];
  float mins[8];
  float weights[32];
  float max_scale = 0.0f;  // group scales are positive once the min is taken out
  float max_min = 0.0f;
  for (int g = 0; g < 8; ++g) {
    const float* xg = x + 32 * g;
    float sum_x2 = 0.0f;
    for (int l = 0; l < 32; ++l) sum_x2 += xg[l] * xg[l];
    const float av_x = std::sqrt(sum_x2 / 32.0f);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(xg[l]);
    scales[g] = fit_affine(32, nmax, xg, weights, L + 32 * g, &mins[g], rmin, rdelta, nstep, false);
    if (scales[g] > max_scale) max_scale = scales[g];
    if (mins[g] > max_min) max_min = mins[g];
  }
  const float inv_scale = max_scale > 0.0f ? 63.0f / max_scale : 0.0f;
  const float inv_min = max_min > 0.0f ? 63.0f / max_min : 0.0f;
  uint8_t ls[8];
  uint8_t lm[8];
  for (int g = 0; g < 8; ++g) {
    // The uint8_t wrap of a (never expected) negative scale is llama.cpp's; keep it.
    const auto s = static_cast<uint8_t>(nearest_int(inv_scale * scales[g]));
    const auto m = static_cast<uint8_t>(nearest_int(inv_min * mins[g]));
    ls[g] = s < 63 ? s : 63;
    lm[g] = m < 63 ? m : 63;
  }
  pack_k4_scale_min(ls, lm, y->scales);
  y->d = fp32_to_fp16(max_scale / 63.0f);
  y->dmin = fp32_to_fp16(max_min / 63.0f);
  const float d_all = fp16_to_fp32(y->d);
  const float dmin_all = fp16_to_fp32(y->dmin);
  for (int g = 0; g < 8; ++g) {
    uint8_t sc, m;
    unpack_k4_scale_min(g, y->scales, &sc, &m);
    const float d = d_all * static_cast<float>(sc);
    if (d == 0.0f) continue;
    const float dm = dmin_all * static_cast<float>(m);
    for (int l = 0; l < 32; ++l) {
      L[32 * g + l] = static_cast<uint8_t>(clamp_int(nearest_int((x[32 * g + l] + dm) / d), 0, nmax));
    }
  }
}

}  // namespace

void quantize_row_q2_K(const float* __restrict src, void* __restrict dst, int64_t n) {
  auto* y = static_cast<BlockQ2_K*>(dst);
  constexpr float kScaleLevels = 15.0f;
  uint8_t L[kQK_K];
  float weights[16];
  float scales[16];
  float mins[16];
  for (int64_t i = 0; i < n / kQK_K; ++i, src += kQK_K) {
    float max_scale = 0.0f;
    float max_min = 0.0f;
    for (int g = 0; g < 16; ++g) {
      for (int l = 0; l < 16; ++l) weights[l] = std::fabs(src[16 * g + l]);
      scales[g] = fit_affine(16, 3, src + 16 * g, weights, L + 16 * g, &mins[g], -0.5f, 0.1f, 15, true);
      if (scales[g] > max_scale) max_scale = scales[g];
      if (mins[g] > max_min) max_min = mins[g];
    }
    BlockQ2_K& b = y[i];
    if (max_scale > 0.0f) {
      const float iscale = kScaleLevels / max_scale;
      for (int g = 0; g < 16; ++g) b.scales[g] = static_cast<uint8_t>(nearest_int(iscale * scales[g]));
      b.d = fp32_to_fp16(max_scale / kScaleLevels);
    } else {
      for (int g = 0; g < 16; ++g) b.scales[g] = 0;
      b.d = fp32_to_fp16(0.0f);
    }
    if (max_min > 0.0f) {
      const float iscale = kScaleLevels / max_min;
      for (int g = 0; g < 16; ++g) {
        b.scales[g] = static_cast<uint8_t>(b.scales[g] | (nearest_int(iscale * mins[g]) << 4));
      }
      b.dmin = fp32_to_fp16(max_min / kScaleLevels);
    } else {
      b.dmin = fp32_to_fp16(0.0f);
    }
    const float d_all = fp16_to_fp32(b.d);
    const float dmin_all = fp16_to_fp32(b.dmin);
    for (int g = 0; g < 16; ++g) {
      const float d = d_all * static_cast<float>(b.scales[g] & 0x0f);
      if (d == 0.0f) continue;
      const float dm = dmin_all * static_cast<float>(b.scales[g] >> 4);
      for (int l = 0; l < 16; ++l) {
        L[16 * g + l] = static_cast<uint8_t>(clamp_int(nearest_int((src[16 * g + l] + dm) / d), 0, 3));
      }
    }
    pack_2bit(L, b.qs);
  }
}

void quantize_row_q3_K(const float* __restrict src, void* __restrict dst, int64_t n) {
  auto* y = static_cast<BlockQ3_K*>(dst);
  int8_t L[kQK_K];
  float scales[16];
  for (int64_t i = 0; i < n / kQK_K; ++i, src += kQK_K) {
    BlockQ3_K& b = y[i];
    float max_scale = 0.0f;
    float amax = 0.0f;
    for (int g = 0; g < 16; ++g) {
      scales[g] = fit_symmetric_q3(src + 16 * g, L + 16 * g);
      const float a = std::fabs(scales[g]);
      if (a > amax) {
        amax = a;
        max_scale = scales[g];
      }
    }
    std::memset(b.scales, 0, sizeof(b.scales));
    if (max_scale != 0.0f) {
      const float iscale = -32.0f / max_scale;
      for (int g = 0; g < 16; ++g) {
        const int l = clamp_int(static_cast<int8_t>(nearest_int(iscale * scales[g])), -32, 31) + 32;
        if (g < 8) {
          b.scales[g] = static_cast<uint8_t>(l & 0x0f);
        } else {
          b.scales[g - 8] = static_cast<uint8_t>(b.scales[g - 8] | ((l & 0x0f) << 4));
        }
        b.scales[8 + g % 4] = static_cast<uint8_t>(b.scales[8 + g % 4] | ((l >> 4) << (2 * (g / 4))));
      }
      b.d = fp32_to_fp16(1.0f / iscale);
    } else {
      b.d = fp32_to_fp16(0.0f);
    }
    int sc[16];
    unpack_q3_K_scales(b.scales, sc);
    const float d_all = fp16_to_fp32(b.d);
    for (int g = 0; g < 16; ++g) {
      const float d = d_all * static_cast<float>(sc[g]);
      if (d == 0.0f) continue;
      for (int l = 0; l < 16; ++l) {
        L[16 * g + l] = static_cast<int8_t>(clamp_int(nearest_int(src[16 * g + l] / d), -4, 3) + 4);
      }
    }
    pack_q3_K(L, b);
  }
}

void quantize_row_q4_K(const float* __restrict src, void* __restrict dst, int64_t n) {
  auto* y = static_cast<BlockQ4_K*>(dst);
  uint8_t L[kQK_K];
  for (int64_t i = 0; i < n / kQK_K; ++i, src += kQK_K) {
    quantize_k4_style(src, &y[i], 15, -1.0f, 0.1f, 20, L);
    pack_q4_K(L, y[i]);
  }
}

void quantize_row_q5_K(const float* __restrict src, void* __restrict dst, int64_t n) {
  auto* y = static_cast<BlockQ5_K*>(dst);
  uint8_t L[kQK_K];
  for (int64_t i = 0; i < n / kQK_K; ++i, src += kQK_K) {
    BlockQ5_K& b = y[i];
    quantize_k4_style(src, &b, 31, -0.5f, 0.1f, 15, L);
    pack_q5_K(L, b);
  }
}

void quantize_row_q6_K(const float* __restrict src, void* __restrict dst, int64_t n) {
  auto* y = static_cast<BlockQ6_K*>(dst);
  int8_t L[kQK_K];
  float scales[16];
  for (int64_t i = 0; i < n / kQK_K; ++i, src += kQK_K) {
    BlockQ6_K& b = y[i];
    float max_scale = 0.0f;
    float max_abs_scale = 0.0f;
    for (int g = 0; g < 16; ++g) {
      scales[g] = fit_symmetric(16, 32, src + 16 * g, L + 16 * g);
      const float a = std::fabs(scales[g]);
      if (a > max_abs_scale) {
        max_abs_scale = a;
        max_scale = scales[g];
      }
    }
    if (max_abs_scale < kGroupMaxEps) {
      std::memset(&b, 0, sizeof(b));
      continue;
    }
    const float iscale = -128.0f / max_scale;
    b.d = fp32_to_fp16(1.0f / iscale);
    for (int g = 0; g < 16; ++g) {
      const int s = nearest_int(iscale * scales[g]);
      b.scales[g] = static_cast<int8_t>(s < 127 ? s : 127);
    }
    const float d_all = fp16_to_fp32(b.d);
    for (int g = 0; g < 16; ++g) {
      const float d = d_all * static_cast<float>(b.scales[g]);
      if (d == 0.0f) continue;
      for (int l = 0; l < 16; ++l) {
        L[16 * g + l] = static_cast<int8_t>(clamp_int(nearest_int(src[16 * g + l] / d), -32, 31) + 32);
      }
    }
    pack_q6_K(L, b);
  }
}

// Q8_K puts the largest |x| on -127 (not -128) so that |q| <= 127 everywhere, which lets
// SIMD dots use sign tricks without overflow.
void quantize_row_q8_K(const float* __restrict src, void* __restrict dst, int64_t n) {
  auto* y = static_cast<BlockQ8_K*>(dst);
  for (int64_t i = 0; i < n / kQK_K; ++i, src += kQK_K) {
    BlockQ8_K& b = y[i];
    float max = 0.0f;
    float amax = 0.0f;
    for (int j = 0; j < kQK_K; ++j) {
      const float a = std::fabs(src[j]);
      if (a > amax) {
        amax = a;
        max = src[j];
      }
    }
    if (amax == 0.0f) {
      std::memset(&b, 0, sizeof(b));
      continue;
    }
    const float iscale = -127.0f / max;
    for (int j = 0; j < kQK_K; ++j) {
      const int v = nearest_int(iscale * src[j]);
      b.qs[j] = static_cast<int8_t>(v < 127 ? v : 127);
    }
    for (int g = 0; g < 16; ++g) {
      int sum = 0;
      for (int l = 0; l < 16; ++l) sum += b.qs[16 * g + l];
      b.bsums[g] = static_cast<int16_t>(sum);
    }
    b.d = 1.0f / iscale;
  }
}

}  // namespace pagoda::quant

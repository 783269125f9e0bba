// Exponentials for softmax-style sums over a whole vocabulary. The sampler computes
// e^(logit - max) for up to 262k tokens per step, and std::exp neither inlines nor
// vectorizes at our baseline flags; these forms do (4-wide on SSE2) and are accurate to
// about 1e-7 relative, the same as float std::exp.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>

namespace pagoda {

// e^x for x <= 0. Returns exactly 0 for x < -80 (including -inf): such weights are below
// 1e-34 of the best token's and cannot change a float sum, and a banned (-inf) token
// must never get a chance to be drawn. Written without float branches so that loops
// calling it vectorize: with -ftrapping-math (the default) the compiler will not turn a
// float comparison into a select, so the range check is done on the bit pattern.
inline float exp_nonpositive(float x) {
  // For x <= 0 the sign bit is set, and a larger unsigned pattern means a more negative
  // number; -inf (0xFF800000) and negative NaNs sort above the cut too.
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  constexpr uint32_t kMinus80 = 0xC2A00000u;  // bit pattern of -80.0f
  const uint32_t in_range = 0u - static_cast<uint32_t>(bits <= kMinus80);
  x = std::bit_cast<float>(std::min(bits, kMinus80));
  // e^x = 2^k * e^r with k = round(x / ln 2) and |r| <= ln(2)/2. Adding 1.5 * 2^23
  // rounds to an integer and leaves k in the low mantissa bits.
  constexpr float kShift = 12582912.0f;
  const float kf = x * 1.44269504088896341f + kShift;
  const float k = kf - kShift;
  const float r = x - k * 0.693145751953125f - k * 1.428606765330187e-6f;  // Cody-Waite
  float p = 1.0f / 5040;
  p = p * r + 1.0f / 720;
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const int32_t ki = std::bit_cast<int32_t>(kf) - 0x4B400000;
  const uint32_t scaled = std::bit_cast<uint32_t>(p) + static_cast<uint32_t>(ki) * (1u << 23);
  return std::bit_cast<float>(scaled & in_range);
}

// Sum over i of e^((x[i] - shift) * scale), with shift >= every x[i] and scale > 0.
// Accumulated in float lanes per block of 256 and in double across blocks, so the
// result is good to about 1e-7 relative even for a 262k-entry vocabulary.
double sum_exp(std::span<const float> x, float shift, float scale);

// As sum_exp, and also writes each term to out[i] and the sum of each run of
// kExpBlock terms to block_sums[i / kExpBlock] (out: x.size(), block_sums:
// ceil(x.size() / kExpBlock) entries), so that a draw can skip whole blocks.
inline constexpr size_t kExpBlock = 256;
double exp_terms(std::span<const float> x, float shift, float scale, float* out,
                 double* block_sums);

}  // namespace pagoda

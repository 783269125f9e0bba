// Floating-point ground rules shared by the scalar references; include it first in every
// src/quant/*.cpp. The references must round exactly as numpy (gguf-py) and llama.cpp's C
// do: every product and sum rounded to float on its own. GCC contracts a*b+c into an FMA
// in C++ whenever the target has one (even without -ffast-math), which would change
// low bits once someone builds with -march=native, so contraction is switched off for
// the whole translation unit before any other header is seen.
#pragma once

#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include <cstdint>

#include "base/fp16.h"

namespace pagoda::quant {

// Round to nearest, ties to even: llama.cpp's nearest_int. Adding 1.5 * 2^23 leaves the
// rounded integer in the low mantissa bits, which is cheap and vectorizes, unlike lrintf
// on baseline x86-64. Exact for |x| < 2^22; larger inputs (only reachable from degenerate
// FP16 scales) are clamped so the result stays defined. NaN gives an arbitrary int, which
// every caller clamps into its quant range.
inline int nearest_int(float x) {
  constexpr float kLimit = 4194303.0f;
  x = x > kLimit ? kLimit : (x < -kLimit ? -kLimit : x);
  const float biased = x + 12582912.0f;
  return static_cast<int>(fp32_to_bits(biased) & 0x007fffffu) - 0x00400000;
}

// Round half away from zero (C's roundf), as Q8_0 and gguf-py's np_roundf do. Written
// with a truncation so it stays a few SSE2 instructions instead of a libm call. Inputs
// are at most about 128 in magnitude; anything larger or NaN is pinned to 255 so the cast
// is defined.
inline int round_half_away(float x) {
  float a = x < 0 ? -x : x;
  a = a < 256.0f ? a : 255.0f;
  const int t = static_cast<int>(a);
  const int r = t + (a - static_cast<float>(t) >= 0.5f ? 1 : 0);
  return x < 0 ? -r : r;
}

// Truncation toward zero of a value the caller knows is in [0, limit + 1), clamped to
// limit: the "(int8_t)(v + 0.5f)" / np.trunc(...).clip step of the legacy quantizers.
// Out-of-range inputs are pinned to [0, limit] (NaN to 0) so the cast is defined.
inline int trunc_clamped(float v, int limit) {
  const float f = static_cast<float>(limit);
  v = v >= 0.0f ? v : 0.0f;
  v = v < f ? v : f;
  return static_cast<int>(v);
}

}  // namespace pagoda::quant

// Splits a tile's tokens into blocks whose sizes are compile-time constants, so a
// micro-kernel keeps one block's accumulators in registers: kFirst tokens while that
// many are left, then each of kRest once where it fits (sizes in decreasing order).
// Header-only and inline: each SIMD body instantiates it with its own micro-kernel.
#pragma once

#include <cstdint>
#include <type_traits>

namespace pagoda::simd {

// run(t, std::integral_constant<int, N>) for the block of N tokens starting at t.
template <int kFirst, int... kRest, typename Run>
inline void for_token_blocks(int64_t count, Run&& run) {
  int64_t t = 0;
  for (; count - t >= kFirst; t += kFirst) run(t, std::integral_constant<int, kFirst>{});
  (
      [&] {
        if (count - t >= kRest) {
          run(t, std::integral_constant<int, kRest>{});
          t += kRest;
        }
      }(),
      ...);
}

}  // namespace pagoda::simd

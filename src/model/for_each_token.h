// The token-wise passes of the forward pass (norms, residual adds, RoPE, KV stores,
// activations), split across the pool once a batch is wide. Internal to the model module;
// called from the engine's thread only.
#pragma once

#include <cstdint>

#include "base/thread_pool.h"

namespace pagoda {

// A parallel region costs a microsecond or two; below this many floats per pass (a decode
// of a few sequences) the token-wise work runs on the calling thread instead.
inline constexpr int64_t kMinParallelFloats = 8192;

// fn(t) for every token t < n. The token-wise passes between the matrix multiplications
// (norms, residual adds, RoPE, KV stores, activations) are independent per token, so they
// split across the pool like the multiplications do; run serially they left the other
// threads spinning for ~10% of a batched step. `width`: floats a token's pass touches.
template <class F>
void for_each_token(ThreadPool& pool, int64_t n, int64_t width, const F& fn) {
  if (n < 2 || n * width < kMinParallelFloats) {
    for (int64_t t = 0; t < n; ++t) fn(t);
    return;
  }
  pool.parallel_for(n, 1, [&](int64_t b, int64_t e, int) {
    for (int64_t t = b; t < e; ++t) fn(t);
  });
}

}  // namespace pagoda

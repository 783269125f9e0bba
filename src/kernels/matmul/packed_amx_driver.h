// Internal: the loop every packed AMX tile body (packed_k4_amx.cpp, packed_k6_amx.cpp)
// runs around its per-panel work: activations staged and the tiles configured once per 64
// tokens, each panel's FP32 accumulators (a token per line) zeroed, filled by the body
// and stored to y under the panel's row mask, the tile state released after each staging.
// Include only from *_amx.cpp files (internal linkage).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/matmul/packed_weights.h"
#include "kernels/simd/amx_common.h"
#include "kernels/simd/avx512_common.h"

namespace pagoda::simd {
namespace {

constexpr int kAmxTok = 64;  // tokens per staging (matmul hands at most 64 per call)

// A PackedKernels::tile: the VNNI body an AMX body hands small calls to.
using PackedTileFn = decltype(PackedKernels::tile);

// stage(xt, tc): the body's per-token terms for tokens [t0, t0 + tc) at xt.
// run_panel(panel, prefetch_next, xt, tc): adds the panel's dots into acc[0 .. tc).
template <int kBytes, typename Stage, typename RunPanel>
inline void amx_tile_loop(const uint8_t* panels, size_t panel_bytes, int64_t rows, const uint8_t* x, size_t x_stride,
                          int64_t tokens, float* y, size_t y_stride, Z64* acc, Stage&& stage, RunPanel&& run_panel) {
  for (int64_t t0 = 0; t0 < tokens; t0 += kAmxTok) {
    const int64_t tc = tokens - t0 < kAmxTok ? tokens - t0 : kAmxTok;
    const uint8_t* xt = x + t0 * x_stride;
    stage(xt, tc);
    configure_tiles<kBytes>(static_cast<int>(tc % 16));
    for (int64_t r0 = 0; r0 < rows; r0 += kPanelRows) {
      const uint8_t* panel = panels + static_cast<size_t>(r0 / kPanelRows) * panel_bytes;
      for (int64_t t = 0; t < tc; ++t) _mm512_store_ps(acc[t].b, _mm512_setzero_ps());
      run_panel(panel, r0 + kPanelRows < rows, xt, tc);
      const __mmask16 mask = row_mask(rows - r0);
      float* yp = y + t0 * y_stride + r0;
      for (int64_t t = 0; t < tc; ++t)
        _mm512_mask_storeu_ps(yp + t * y_stride, mask, _mm512_load_ps(reinterpret_cast<const float*>(acc[t].b)));
    }
    _tile_release();
  }
}

}  // namespace
}  // namespace pagoda::simd

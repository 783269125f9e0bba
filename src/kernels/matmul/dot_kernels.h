// The per-format compute kernels behind matmul, chosen per SIMD target. A format's
// kernels take weights in that format and activations already converted to its vec-dot
// type (src/quant/formats.h); the scalar references in src/quant/ define the results and
// every SIMD body is tested against them. Bodies live in *_avx2.cpp / *_avx512.cpp files
// and register through simd_registry.h; a member a target leaves empty falls back to the
// next lower target, down to scalar.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/simd/simd_target.h"
#include "tensor/dtype.h"

namespace pagoda {

struct DotKernels {
  // Dot of one weight row with one converted activation row, n values.
  float (*dot)(int64_t n, const void* w, const void* x) = nullptr;
  // Several weight rows with one activation row: y[r] = dot(w + r * w_stride, x) for
  // r < rows, bit for bit. Decode's workhorse: a body does the work that depends only on
  // the activations once for all the rows it runs together. A target that gives dot but
  // not dot_rows gets a loop over its dot.
  void (*dot_rows)(int64_t n, const uint8_t* w, size_t w_stride, int64_t rows, const void* x, float* y) = nullptr;
  // A tile of outputs: y[t * y_stride + r] = dot(w + r * w_stride, x + t * x_stride)
  // for r < rows, t < tokens. Prefill's workhorse: a body reuses each weight block it
  // loads across several tokens.
  void (*tile)(int64_t n, const uint8_t* w, size_t w_stride, int64_t rows, const uint8_t* x, size_t x_stride,
               int64_t tokens, float* y, size_t y_stride) = nullptr;
  // dot_rows streams its rows one after another (it does not interleave them), so decode's
  // GEMV hands it a work item's rows in one call rather than calling dot per row.
  bool gemv_by_rows = false;
  // Converts one activation row of n floats to the vec-dot type.
  void (*quantize_x)(const float* src, void* dst, int64_t n) = nullptr;
  // Formats whose many-token products run on another format's tile (2:4 sparse on its
  // dense counterpart): one row of n values re-encoded as `expanded` (null: none). matmul
  // expands a thread's rows once per call, where `tile` above must expand per call.
  void (*expand_row)(const void* src, void* dst, int64_t n) = nullptr;
  DType expanded = DType::F32;
  // The same for `rows` rows straight into the panels of `expanded` (packed_weights.h:
  // the bytes pack_panels writes for the expanded rows), where that format is packed on
  // this target: no dense rows in between (null: matmul expands rows with expand_row and runs
  // the row-major tile of `expanded`).
  void (*expand_panels)(const uint8_t* w, size_t w_stride, int64_t rows, int64_t n, uint8_t* panels) = nullptr;
};

// Kernels for weights of type t on `target` (which must be runnable here), every member
// filled (falling back as described above). For tests and benchmarks.
DotKernels dot_kernels(DType t, SimdTarget target);

// The best kernels for this machine; cached, thread-safe.
const DotKernels& dot_kernels(DType t);

}  // namespace pagoda

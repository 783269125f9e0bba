// Internal: the many-token product of the 2:4 sparse formats (quant/sparse24.h) on their
// dense counterparts' tile kernels: rows are expanded (Q8_0_S24 -> Q8_0, Q4_0_S24 ->
// Q4_0, same values) and handed to that format's tile of the same SIMD target. Prefill is
// compute-bound, and the dense tiles are the fastest int8 code there is here; the
// sparse formats pay off in decode, which reads only their bytes (sparse24_avx512vbmi.cpp).
// Thread-safe (per-thread scratch).
#pragma once

#include "kernels/matmul/dot_kernels.h"

namespace pagoda {

// DotKernels::tile for sparse type t on target s: expands the rows of each call.
decltype(DotKernels::tile) s24_expanded_tile(DType t, SimdTarget s);

// Fills k's expand_row / expanded for sparse type t (matmul expands once per call).
void s24_set_expansion(DType t, DotKernels& k);

}  // namespace pagoda

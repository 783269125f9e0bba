// Internal: how the per-target kernel files hand their bodies to dot_kernels(). Each
// format family has one file per target (e.g. legacy_avx2.cpp for Q4_0/Q5_0/Q8_0) with a
// function that fills the members it implements for a type and leaves the rest alone.
#pragma once

#include "kernels/matmul/dot_kernels.h"

namespace pagoda::simd {

void register_float_avx2(DType t, DotKernels& k);    // F32, F16, BF16
void register_legacy_avx2(DType t, DotKernels& k);   // Q4_0, Q5_0, Q8_0 (+ Q8_0 activations)
void register_kquant_avx2(DType t, DotKernels& k);   // Q4_K, Q5_K, Q6_K, ... (+ Q8_K activations)
void register_sparse24_avx2(DType t, DotKernels& k);  // Q8_0_S24, Q4_0_S24: tile and activations only
void register_float_avx512(DType t, DotKernels& k);
void register_legacy_avx512(DType t, DotKernels& k);
void register_kquant_avx512(DType t, DotKernels& k);
void register_sparse24_avx512(DType t, DotKernels& k);  // needs VBMI (checked inside)

inline void register_avx2(DType t, DotKernels& k) {
  register_float_avx2(t, k);
  register_legacy_avx2(t, k);
  register_kquant_avx2(t, k);
  register_sparse24_avx2(t, k);
}
inline void register_avx512(DType t, DotKernels& k) {
  register_float_avx512(t, k);
  register_legacy_avx512(t, k);
  register_kquant_avx512(t, k);
  register_sparse24_avx512(t, k);
}

}  // namespace pagoda::simd

// avx2 bodies of the float format kernels: float_body.h over vec_avx2.h (see
// dot_kernels.h, simd_registry.h). Compiled for avx2 (+FMA, F16C) only and called only
// when the CPU has it.
//
// tile: register blocks of 3 rows x 4 tokens (12 accumulators, 3 weight vectors and one
// activation vector fill the 16 ymm registers). dot prefetches nothing (the 8 KB
// prefetch of the avx512 body was measured there only).
#include "kernels/simd/simd_intrinsics.h"

#include "kernels/simd/vec_avx2.h"
#include "kernels/matmul/float_body.h"
#include "kernels/matmul/simd_registry.h"

namespace pagoda::simd {

void register_float_avx2(DType t, DotKernels& k) { FloatBody<V256, 3, 4, 0>::fill(t, k); }

}  // namespace pagoda::simd

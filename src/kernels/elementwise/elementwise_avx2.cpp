// avx2 bodies of the elementwise kernels: elementwise_body.h over vec_avx2.h. Compiled for
// avx2 only and called only when the CPU has it.
#include "kernels/simd/simd_intrinsics.h"

#include "kernels/simd/vec_avx2.h"
#include "kernels/elementwise/elementwise_body.h"

namespace pagoda::simd {

void register_elementwise_avx2(ElementwiseKernels& k) { Elementwise<V256>::fill(k); }

}  // namespace pagoda::simd

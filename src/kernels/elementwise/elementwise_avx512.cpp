// avx512 bodies of the elementwise kernels: elementwise_body.h over vec_avx512.h. Compiled for
// avx512 only and called only when the CPU has it.
#include "kernels/simd/simd_intrinsics.h"

#include "kernels/simd/vec_avx512.h"
#include "kernels/elementwise/elementwise_body.h"

namespace pagoda::simd {

void register_elementwise_avx512(ElementwiseKernels& k) { Elementwise<V512>::fill(k); }

}  // namespace pagoda::simd

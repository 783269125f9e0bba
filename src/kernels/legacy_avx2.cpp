// avx2 bodies of the legacy format kernels (see dot_kernels.h, simd_registry.h). This
// file is compiled for avx2 only and called only when the CPU has it.
#include <immintrin.h>

#include "kernels/simd_registry.h"

namespace pagoda::simd {

void register_legacy_avx2(DType t, DotKernels& k) {
  (void)t;
  (void)k;
}

}  // namespace pagoda::simd

// AVX-512BW bodies of the W8A8 kernels (w8a8_avx512_body.h without VNNI), for CPUs with
// AVX-512 but no VNNI (Skylake-SP/X). Compiled for AVX-512 F, BW, VL, DQ and nothing
// newer, so the compiler cannot fuse the products into VNNI instructions either.
#include "kernels/simd/simd_intrinsics.h"
#include "kernels/matmul/w8a8_avx512_body.h"
#include "kernels/matmul/w8a8_bodies.h"

namespace pagoda::simd {

void w8a8_avx512bw(W8A8Kernels& k) { fill<false>(k); }

}  // namespace pagoda::simd

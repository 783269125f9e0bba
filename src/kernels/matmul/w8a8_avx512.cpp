// AVX-512 VNNI bodies of the W8A8 kernels (w8a8_avx512_body.h with vpdpbusd). Compiled
// for avx512 (F, BW, VL, DQ, VNNI) only and called only when the CPU has it.
//
#include "kernels/simd/simd_intrinsics.h"
#include "kernels/matmul/w8a8_avx512_body.h"
#include "kernels/matmul/w8a8_bodies.h"

namespace pagoda::simd {

void w8a8_avx512vnni(W8A8Kernels& k) { fill<true>(k); }

}  // namespace pagoda::simd

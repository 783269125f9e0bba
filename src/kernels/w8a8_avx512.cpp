// AVX-512 VNNI bodies of the W8A8 kernels (w8a8_avx512_body.h with vpdpbusd). Compiled
// for avx512 (F, BW, VL, DQ, VNNI) only and called only when the CPU has it.
//
// GCC 12's AVX-512 headers seed many intrinsics with a self-initialized "undefined"
// register (GCC PR105593), which -Wuninitialized reports once they are inlined.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include "kernels/w8a8_avx512_body.h"
#include "kernels/w8a8_bodies.h"

namespace pagoda::simd {

void w8a8_avx512vnni(W8A8Kernels& k) { fill<true>(k); }

}  // namespace pagoda::simd

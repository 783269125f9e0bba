// Internal: the SIMD bodies of the W8A8 kernels (w8a8_kernels.h), one function per file
// compiled for its instruction set: w8a8_avx2.cpp, w8a8_avx512bw.cpp (AVX-512 F/BW/VL/DQ,
// no VNNI) and w8a8_avx512.cpp (with VNNI). Each fills every member. They fill a struct
// the caller built rather than return one, so no constructor is compiled for AVX-512.
#pragma once

#include "kernels/matmul/w8a8_kernels.h"

namespace pagoda::simd {

void w8a8_avx2(W8A8Kernels& k);
void w8a8_avx512bw(W8A8Kernels& k);
void w8a8_avx512vnni(W8A8Kernels& k);

}  // namespace pagoda::simd

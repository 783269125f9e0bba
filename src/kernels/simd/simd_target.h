// The SIMD instruction sets kernels are compiled for, and which of them this CPU runs:
// the one list every kernel family dispatches on. Kernels are built once per target
// (files named *_avx2.cpp / *_avx512bw.cpp / *_avx512.cpp) and chosen at run time, so
// one binary runs everywhere and uses what it finds. A family with no body of its own
// for a target uses its best body below it (the order of the enum): compare with >=.
#pragma once

#include <vector>

namespace pagoda {

enum class SimdTarget { kScalar = 0, kAvx2 = 1, kAvx512Bw = 2, kAvx512 = 3 };

// kAvx2: AVX2 + FMA + F16C. kAvx512Bw: AVX-512 F, BW, VL and DQ on top (Skylake-X).
// kAvx512: VNNI as well (Ice Lake, Zen 4); BF16 is checked where it is used.
SimdTarget best_simd_target();
// Every target this CPU can run, lowest first (always starts with kScalar).
std::vector<SimdTarget> runnable_simd_targets();
const char* simd_target_name(SimdTarget t);

}  // namespace pagoda

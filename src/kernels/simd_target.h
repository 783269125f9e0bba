// The SIMD instruction sets kernels are compiled for, and which of them this CPU runs.
// Kernels are built once per target (files named *_avx2.cpp / *_avx512.cpp) and chosen
// at run time, so one binary runs everywhere and uses what it finds.
#pragma once

#include <vector>

namespace pagoda {

enum class SimdTarget { kScalar = 0, kAvx2 = 1, kAvx512 = 2 };

// kAvx2: AVX2 + FMA + F16C. kAvx512: F, BW, VL, DQ and VNNI on top (Ice Lake, Zen 4).
SimdTarget best_simd_target();
// Every target this CPU can run, lowest first (always starts with kScalar).
std::vector<SimdTarget> runnable_simd_targets();
const char* simd_target_name(SimdTarget t);

}  // namespace pagoda

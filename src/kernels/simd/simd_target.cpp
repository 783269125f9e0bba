#include "kernels/simd/simd_target.h"

#include "base/cpu_features.h"

namespace pagoda {

std::vector<SimdTarget> runnable_simd_targets() {
  const CpuFeatures& f = cpu_features();
  std::vector<SimdTarget> out = {SimdTarget::kScalar};
  if (f.avx2 && f.fma && f.f16c) {
    out.push_back(SimdTarget::kAvx2);
    if (f.avx512f && f.avx512bw && f.avx512dq && f.avx512vl) {
      out.push_back(SimdTarget::kAvx512Bw);
      if (f.avx512vnni) out.push_back(SimdTarget::kAvx512);
    }
  }
  return out;
}

SimdTarget best_simd_target() {
  static const SimdTarget best = runnable_simd_targets().back();
  return best;
}

const char* simd_target_name(SimdTarget t) {
  switch (t) {
    case SimdTarget::kScalar: return "scalar";
    case SimdTarget::kAvx2: return "avx2";
    case SimdTarget::kAvx512Bw: return "avx512bw";
    case SimdTarget::kAvx512: return "avx512";
  }
  return "?";
}

}  // namespace pagoda

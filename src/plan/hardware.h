// What this machine does per second with each weight format, the inputs of `pagoda plan`'s
// speed roofline: the bytes per second a one-token matmul (decode's GEMV) streams and the
// FLOP/s a 128-token matmul (prefill's GEMM) reaches, both through the engine's own kernels
// (repacked panels where the engine repacks), on the thread pool the engine would use. A
// probe, not a datasheet: it sees the memory system, the SIMD target and the other load
// the machine has now.
//
// Cost: measure() takes about a quarter of a second per format (a 128 MiB matrix read
// several times, a 4096 x 4096 GEMM); results are cached per CPU and thread count in
// $PAGODA_CACHE/hardware/, so `--hardware auto` measures once.
// Thread-safety: measure() uses the pool it is given; the rest are pure.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/thread_pool.h"
#include "tensor/dtype.h"

namespace pagoda {

struct FormatRate {
  DType type = DType::F32;
  double gemv_bytes_per_s = 0;  // weight bytes streamed per second, one token
  double gemm_flops = 0;        // 2 * rows * cols * tokens per second, 128 tokens
};

struct HardwareProfile {
  std::string name;  // "auto" when measured here, else the named profile
  std::string cpu;   // cpu_features_string() / the profile's description
  int threads = 0;
  std::vector<FormatRate> formats;
  // The rate of `t`, or of the nearest measured format by bits per weight when t was not
  // measured (named profiles list a few).
  const FormatRate& rate(DType t) const;
};

// Measures `types` (duplicates ignored) on `pool`.
HardwareProfile measure_hardware(std::span<const DType> types, ThreadPool& pool);

// The cached profile of this CPU and thread count holding every one of `types`, measuring
// (and caching) what is missing; `remeasure` ignores the cache.
Result<HardwareProfile> auto_hardware(std::span<const DType> types, ThreadPool& pool, bool remeasure);

// Named profiles (bandwidth and compute of common machines, for planning one you are not
// on); null for an unknown name. named_profiles() lists them.
const HardwareProfile* named_profile(const std::string& name);
std::vector<std::string> named_profiles();

}  // namespace pagoda

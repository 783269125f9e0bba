// What the CPU we run on can do, read once with CPUID. Kernels pick their body from this
// at run time, so one binary runs on any x86-64 machine.
#pragma once

#include <string>

namespace pagoda {

struct CpuFeatures {
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512dq = false;
  bool avx512vl = false;
  bool avx512vnni = false;
  bool avx512bf16 = false;
  bool avx512vbmi = false;   // vpermb, vpmultishiftqb
  bool avx512vbmi2 = false;  // vpcompressb, vpexpandb: the 2:4 sparse kernels' gathers
  bool avxvnni = false;
  // AMX tiles with int8 dot products (Sapphire Rapids and later), and the kernel's leave
  // to use them: Linux hands out the 8 KiB tile state only to a process that asks
  // (arch_prctl ARCH_REQ_XCOMP_PERM), which detection does once.
  bool amx_int8 = false;
};

// Detected once; thread-safe. PAGODA_CPU=scalar|avx2|avx512 in the environment caps what
// is reported (avx512: everything but AMX), so the slower bodies can be exercised and
// compared on a fast machine.
const CpuFeatures& cpu_features();
std::string cpu_features_string();

}  // namespace pagoda

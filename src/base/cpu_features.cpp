#include "base/cpu_features.h"

#include <cstdlib>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace pagoda {
namespace {

// Asks Linux for the AMX tile data state (XFEATURE_XTILEDATA, 18): without it the first
// tile instruction is a SIGILL even where CPUID and XCR0 say AMX is there.
bool request_amx_permission() {
#if defined(__linux__) && defined(__x86_64__)
  constexpr long kArchReqXcompPerm = 0x1023;
  constexpr long kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  return false;
#endif
}

CpuFeatures detect() {
  CpuFeatures f;
  bool amx_cpu = false;
#if defined(__x86_64__) || defined(__i386__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = (c >> 27) & 1;
  f.fma = (c >> 12) & 1;
  f.f16c = (c >> 29) & 1;
  bool avx_os = false, avx512_os = false, amx_os = false;
  if (osxsave) {
    unsigned lo, hi;
    __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    avx_os = (lo & 0x6) == 0x6;
    avx512_os = (lo & 0xe6) == 0xe6;
    amx_os = (lo & 0x60000) == 0x60000;  // XTILECFG and XTILEDATA
  }
  if (__get_cpuid_max(0, nullptr) >= 7) {
    __cpuid_count(7, 0, a, b, c, d);
    f.avx2 = avx_os && ((b >> 5) & 1);
    f.avx512f = avx512_os && ((b >> 16) & 1);
    f.avx512bw = avx512_os && ((b >> 30) & 1);
    f.avx512dq = avx512_os && ((b >> 17) & 1);
    f.avx512vl = avx512_os && ((b >> 31) & 1);
    f.avx512vnni = avx512_os && ((c >> 11) & 1);
    f.avx512vbmi = avx512_os && ((c >> 1) & 1);
    f.avx512vbmi2 = avx512_os && ((c >> 6) & 1);
    amx_cpu = amx_os && ((d >> 24) & 1) && ((d >> 25) & 1);  // AMX-TILE, AMX-INT8
    __cpuid_count(7, 1, a, b, c, d);
    f.avxvnni = avx_os && ((a >> 4) & 1);
    f.avx512bf16 = avx512_os && ((a >> 5) & 1);
  }
  if (!avx_os) f.fma = f.f16c = false;
#endif
  const char* cap = std::getenv("PAGODA_CPU");
  if (cap != nullptr) {
    if (std::strcmp(cap, "scalar") == 0) f = CpuFeatures{};
    if (std::strcmp(cap, "avx2") == 0) {
      f.avx512f = f.avx512bw = f.avx512dq = f.avx512vl = f.avx512vnni = f.avx512bf16 = f.avx512vbmi = f.avx512vbmi2 = false;
    }
    if (std::strcmp(cap, "scalar") == 0 || std::strcmp(cap, "avx2") == 0 || std::strcmp(cap, "avx512") == 0)
      amx_cpu = false;
  }
  // The AMX bodies are AVX-512 VNNI code around the tile instructions.
  f.amx_int8 = amx_cpu && f.avx512vnni && f.avx512bw && request_amx_permission();
  return f;
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = detect();
  return f;
}

std::string cpu_features_string() {
  const CpuFeatures& f = cpu_features();
  std::string s;
  auto add = [&](bool on, const char* n) {
    if (on) {
      if (!s.empty()) s += ' ';
      s += n;
    }
  };
  add(f.avx2, "avx2");
  add(f.fma, "fma");
  add(f.f16c, "f16c");
  add(f.avx512f, "avx512f");
  add(f.avx512bw, "avx512bw");
  add(f.avx512dq, "avx512dq");
  add(f.avx512vl, "avx512vl");
  add(f.avx512vnni, "avx512vnni");
  add(f.avx512bf16, "avx512bf16");
  add(f.avx512vbmi, "avx512vbmi");
  add(f.avx512vbmi2, "avx512vbmi2");
  add(f.avxvnni, "avxvnni");
  add(f.amx_int8, "amx-int8");
  return s.empty() ? "scalar" : s;
}

}  // namespace pagoda

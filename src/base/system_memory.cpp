#include "base/system_memory.h"

#include <malloc.h>

#include <fstream>
#include <string>

namespace pagoda {

size_t available_memory_bytes() {
  std::ifstream f("/proc/meminfo");
  std::string key, unit;
  size_t kb = 0;
  while (f >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024;
  return 0;
}

size_t heap_in_use_bytes() {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
  const struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;
#else
  return 0;
#endif
}

namespace {

// A "Key:   N kB" line of /proc/self/status, in bytes.
size_t status_kb(const char* key) {
  std::ifstream f("/proc/self/status");
  const std::string k(key);
  for (std::string line; std::getline(f, line);)
    if (line.rfind(k, 0) == 0) return std::stoull(line.substr(k.size())) * 1024;
  return 0;
}

}  // namespace

size_t anonymous_resident_bytes() { return status_kb("RssAnon:"); }

size_t resident_bytes() { return status_kb("VmRSS:"); }

size_t peak_resident_bytes() { return status_kb("VmHWM:"); }

void release_free_heap() {
#if defined(__GLIBC__)
  (void)malloc_trim(0);
#endif
}

}  // namespace pagoda

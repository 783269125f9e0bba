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

size_t anonymous_resident_bytes() {
  std::ifstream f("/proc/self/status");
  std::string key, unit;
  for (std::string line; std::getline(f, line);)
    if (line.rfind("RssAnon:", 0) == 0) return std::stoull(line.substr(8)) * 1024;
  return 0;
}

void release_free_heap() {
#if defined(__GLIBC__)
  (void)malloc_trim(0);
#endif
}

}  // namespace pagoda

#include "base/system_memory.h"

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

}  // namespace pagoda

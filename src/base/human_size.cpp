#include "base/human_size.h"

#include <fmt/format.h>

namespace pagoda {

std::string human_size(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) {
    b /= 1024;
    ++u;
  }
  return fmt::format("{:.2f} {}", b, units[u]);
}

}  // namespace pagoda

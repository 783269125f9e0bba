#include "base/log.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace pagoda {
namespace {
// PAGODA_LOG=error|warn|info|debug in the environment sets the starting level.
int initial_level() {
  const char* e = std::getenv("PAGODA_LOG");
  if (e == nullptr) return static_cast<int>(LogLevel::kWarn);
  if (std::strcmp(e, "error") == 0) return static_cast<int>(LogLevel::kError);
  if (std::strcmp(e, "info") == 0) return static_cast<int>(LogLevel::kInfo);
  if (std::strcmp(e, "debug") == 0) return static_cast<int>(LogLevel::kDebug);
  return static_cast<int>(LogLevel::kWarn);
}
std::atomic<int> g_level{initial_level()};
const char* prefix(LogLevel l) {
  switch (l) {
    case LogLevel::kError: return "error";
    case LogLevel::kWarn: return "warning";
    case LogLevel::kInfo: return "info";
    case LogLevel::kDebug: return "debug";
  }
  return "";
}
}  // namespace

void set_log_level(LogLevel level) { g_level = static_cast<int>(level); }
LogLevel log_level() { return static_cast<LogLevel>(g_level.load()); }
void log_line(LogLevel level, const std::string& text) {
  std::fprintf(stderr, "pagoda %s: %s\n", prefix(level), text.c_str());
}

}  // namespace pagoda

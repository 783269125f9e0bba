#include "base/log.h"

#include <atomic>

namespace pagoda {
namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::kWarn)};
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

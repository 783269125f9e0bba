#include "base/cpu_load.h"

#include <dirent.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>
#include <unordered_map>

namespace pagoda {

namespace {

struct SystemTimes {
  double busy = 0, total = 0, steal = 0;  // clock ticks, all cores
};

SystemTimes read_system() {
  SystemTimes t;
  std::ifstream f("/proc/stat");
  std::string cpu;
  if (!(f >> cpu) || cpu != "cpu") return t;
  // user nice system idle iowait irq softirq steal (guest time is inside user)
  double v[8] = {};
  for (double& x : v) f >> x;
  t.total = v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7];
  t.busy = t.total - v[3] - v[4];
  t.steal = v[7];
  return t;
}

// utime + stime of /proc/<pid>/stat in ticks, and the command name; false when gone.
bool read_process(const std::string& path, double& ticks, std::string& name) {
  std::ifstream f(path);
  std::string line;
  if (!std::getline(f, line)) return false;
  // The name is in parentheses and may hold spaces or parentheses itself.
  const size_t open = line.find('(');
  const size_t close = line.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close < open) return false;
  name = line.substr(open + 1, close - open - 1);
  std::istringstream rest(line.substr(close + 1));
  std::string field;
  // Fields after the name start at 3 (state); utime and stime are 14 and 15.
  for (int i = 3; i <= 13; ++i) rest >> field;
  double utime = 0, stime = 0;
  if (!(rest >> utime >> stime)) return false;
  ticks = utime + stime;
  return true;
}

std::unordered_map<int, std::pair<double, std::string>> read_processes() {
  std::unordered_map<int, std::pair<double, std::string>> out;
  DIR* d = opendir("/proc");
  if (d == nullptr) return out;
  while (dirent* e = readdir(d)) {
    char* end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || pid <= 0) continue;
    double ticks = 0;
    std::string name;
    if (read_process("/proc/" + std::string(e->d_name) + "/stat", ticks, name))
      out[static_cast<int>(pid)] = {ticks, std::move(name)};
  }
  closedir(d);
  return out;
}

}  // namespace

int usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
}

CpuLoad sample_cpu_load(double seconds) {
  CpuLoad r;
  r.cores = usable_cores();
  r.machine_cores = static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
  const double tick = static_cast<double>(std::max(1L, sysconf(_SC_CLK_TCK)));
  const int self = static_cast<int>(getpid());
  seconds = std::clamp(seconds, 0.05, 10.0);

  const SystemTimes s0 = read_system();
  const auto p0 = read_processes();
  const auto t0 = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  const SystemTimes s1 = read_system();
  const auto p1 = read_processes();
  r.window_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  const double total = s1.total - s0.total;
  if (total > 0) {
    // Ticks of all cores over the window: the share of them busy, times the cores.
    r.busy_cores = (s1.busy - s0.busy) / total * r.machine_cores;
    r.steal_share = (s1.steal - s0.steal) / total;
  }
  double own = 0;
  for (const auto& [pid, now] : p1) {
    auto it = p0.find(pid);
    const double before = it != p0.end() ? it->second.first : 0.0;
    if (it == p0.end()) continue;  // started inside the window: its share is unknown
    const double cores = (now.first - before) / tick / r.window_s;
    if (pid == self) {
      own = cores;
      continue;
    }
    if (cores >= 0.02) r.top.push_back({pid, now.second, cores});
  }
  r.other_cores = std::max(0.0, r.busy_cores - own);
  std::sort(r.top.begin(), r.top.end(), [](const ProcessLoad& a, const ProcessLoad& b) { return a.cores > b.cores; });
  if (r.top.size() > 5) r.top.resize(5);
  std::ifstream la("/proc/loadavg");
  la >> r.loadavg_1m;
  return r;
}

}  // namespace pagoda

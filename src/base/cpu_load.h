// What else is running on this machine's cores: the CPU time every process used over a
// short window, read from /proc (the system-wide busy time of /proc/stat and each
// process's utime + stime), so a caller can tell whether its threads will share cores
// with other work. Also the cores this process may run on (its affinity mask, which a
// container or `taskset` narrows below the machine's count).
//
// Cost: sample_cpu_load sleeps for the window and reads /proc/<pid>/stat of every process
// twice (a few milliseconds on a desktop). Thread-safety: no shared state.
#pragma once

#include <string>
#include <vector>

namespace pagoda {

struct ProcessLoad {
  int pid = 0;
  std::string name;  // the comm field
  double cores = 0;  // CPU time over the window / the window
};

struct CpuLoad {
  int cores = 0;            // usable by this process (affinity)
  int machine_cores = 0;    // online in the machine
  double window_s = 0;
  double busy_cores = 0;    // the whole machine: non-idle time / window
  double other_cores = 0;   // busy_cores less this process's own CPU time
  double steal_share = 0;   // of the machine's time, taken by the hypervisor
  double loadavg_1m = 0;
  std::vector<ProcessLoad> top;  // other processes by CPU use, the busiest first (at most 5)
};

// Measures over `seconds` (clamped to [0.05, 10]). Fields that /proc cannot give stay 0.
CpuLoad sample_cpu_load(double seconds);

// Cores this process may run on (sched_getaffinity), at least 1.
int usable_cores();

}  // namespace pagoda

// Threads and cores: the engine splits every matmul over its threads and waits for the
// slowest at each barrier, so a thread without a core of its own (more threads than
// cores, or cores busy with other work) stalls the whole step.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "doctor/checks.h"

namespace pagoda {

namespace {

std::string busiest(const CpuLoad& l) {
  std::string s;
  for (const ProcessLoad& p : l.top) {
    if (!s.empty()) s += ", ";
    s += fmt::format("{} (pid {}) {:.2f}", p.name, p.pid, p.cores);
  }
  return s.empty() ? "no single process stands out" : s;
}

}  // namespace

RateSpread rate_spread(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  auto at = [&](double q) { return v[static_cast<size_t>(std::lround(q * static_cast<double>(v.size() - 1)))]; };
  return RateSpread{v.front(), at(0.1), at(0.5), at(0.9), v.back()};
}

void check_cpu(const DoctorFacts& f, std::vector<Finding>& out) {
  if (!f.cpu) return;
  const CpuFacts& c = *f.cpu;
  const CpuLoad& l = c.load;
  if (c.threads > l.cores) {
    Finding x;
    x.id = "cpu.threads_over_cores";
    x.severity = Severity::kWarning;
    x.what = fmt::format("{} threads on {} usable core{}", c.threads, l.cores, l.cores == 1 ? "" : "s");
    x.why = "every step waits at each matmul for its slowest thread, and a thread that shares a core runs at half "
            "speed or waits for a time slice: decode slows by up to the oversubscription, not just the spare threads' share";
    x.fix = fmt::format("-t {}", l.cores);
    x.data = {{"threads", c.threads}, {"cores", l.cores}, {"machine_cores", l.machine_cores}};
    out.push_back(std::move(x));
  }
  const int free_cores = std::max(0, l.cores - static_cast<int>(std::lround(l.other_cores)));
  if (l.other_cores >= kBusyOtherCores && std::min(c.threads, l.cores) > free_cores) {
    Finding x;
    x.id = "cpu.other_load";
    x.severity = Severity::kWarning;
    x.what = fmt::format("other processes kept {:.1f} of {} cores busy over {:.1f} s: {}", l.other_cores, l.cores,
                         l.window_s, busiest(l));
    x.why = fmt::format("with {} threads the engine shares cores with them; its steps run as slow as the thread that "
                        "loses its core, and measured speeds swing from run to run",
                        std::min(c.threads, l.cores));
    x.fix = free_cores >= 1 ? fmt::format("-t {} (the cores left free), or stop the other work", free_cores)
                            : std::string("stop the other work, or run where cores are free");
    nlohmann::json top = nlohmann::json::array();
    for (const ProcessLoad& p : l.top) top.push_back({{"pid", p.pid}, {"name", p.name}, {"cores", p.cores}});
    x.data = {{"other_cores", l.other_cores}, {"cores", l.cores}, {"window_s", l.window_s}, {"top", top},
              {"loadavg_1m", l.loadavg_1m}};
    out.push_back(std::move(x));
  }
  if (c.stream_samples.size() >= kBandwidthMinSamples) {
    // Decode reads every weight once per token, so its speed follows the memory's read
    // rate: on a host whose rate moves (a VM whose memory channels other guests share)
    // the same run measures differently from one minute to the next, and a profile
    // cached at one moment predicts another moment's speed only as well as the two agree.
    const RateSpread r = rate_spread(c.stream_samples);
    const double lo = r.p10, hi = r.p90, mid = r.median;
    const size_t n = c.stream_samples.size();
    if (lo > 0 && hi / lo >= kBandwidthSwing) {
      Finding x;
      x.id = "cpu.bandwidth_swings";
      x.severity = Severity::kWarning;
      x.what = fmt::format("memory read rate moved between {:.1f} and {:.1f} GB/s (10th and 90th percentile of {} "
                           "samples over {:.1f} s; median {:.1f})",
                           lo / 1e9, hi / 1e9, n, c.stream_window_s * static_cast<double>(n), mid / 1e9);
      x.why = fmt::format("decode streams the weights once per token, so its tokens/s moves with the read rate: "
                          "one run can be {:.2f}x another with nothing changed{}; a speed `pagoda plan` predicts from "
                          "a profile cached at one moment holds for moments like it",
                          hi / lo,
                          l.other_cores >= kBusyOtherCores ? " (other processes here are part of it)"
                                                           : " (nothing else ran here: the host's other guests or its "
                                                             "memory placement)");
      x.fix = "compare speeds only side by side in alternating rounds, by their medians (pagoda bench -r 5, "
              "bench/compare_builds.py); re-measure the profile with `pagoda plan --remeasure` before a prediction "
              "that matters; for steady speeds, a host with dedicated memory bandwidth";
      x.data = {{"p10_bytes_per_s", lo}, {"median_bytes_per_s", mid}, {"p90_bytes_per_s", hi},
                {"min_bytes_per_s", r.min}, {"max_bytes_per_s", r.max}, {"samples", n},
                {"window_s", c.stream_window_s}};
      out.push_back(std::move(x));
    }
  }
  if (l.steal_share >= 0.1) {
    Finding x;
    x.id = "cpu.steal";
    x.severity = Severity::kWarning;
    x.what = fmt::format("the hypervisor took {:.0f}% of this machine's CPU time", 100 * l.steal_share);
    x.why = "stolen time is time the virtual cores do not run: speeds drop and swing with the host's other guests";
    x.fix = "a machine with dedicated cores, or fewer threads than virtual cores";
    x.data = {{"steal_share", l.steal_share}};
    out.push_back(std::move(x));
  }
}

}  // namespace pagoda

#include "doctor/checks.h"

#include <algorithm>

namespace pagoda {

std::span<const DoctorCheck> doctor_checks() {
  static const DoctorCheck checks[] = {
      {"memory", "the configuration fits the memory budget; which change makes it fit", check_memory},
      {"decode", "decode is bound by memory bandwidth, not by the kernels' arithmetic", check_decode_bound},
      {"cpu", "threads against usable cores, and other processes' load on them", check_cpu},
      {"sampling", "temperature, top-p, top-k, min-p and penalties within the ranges that keep output sane",
       check_sampling},
      {"template", "the chat template: present, its special tokens whole, BOS once, turns ending generation",
       check_chat_template},
      {"server", "a running server's preemptions and prefix-cache hit rate", check_server},
  };
  return checks;
}

std::vector<Finding> run_doctor(const DoctorFacts& facts) {
  std::vector<Finding> out;
  for (const DoctorCheck& c : doctor_checks()) c.run(facts, out);
  std::stable_sort(out.begin(), out.end(),
                   [](const Finding& a, const Finding& b) { return static_cast<int>(a.severity) > static_cast<int>(b.severity); });
  return out;
}

}  // namespace pagoda

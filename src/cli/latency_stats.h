// Mean and percentiles of a set of latencies, as the benchmark subcommands report them
// (linear interpolation between order statistics, numpy's default).
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

namespace pagoda {

struct LatencyStats {
  double mean = 0, p50 = 0, p90 = 0, p99 = 0;
};

inline double percentile_of_sorted(const std::vector<double>& v, double p) {
  if (v.empty()) return 0.0;
  const double idx = p / 100.0 * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(idx));
  const size_t hi = std::min(v.size() - 1, lo + 1);
  return v[lo] + (v[hi] - v[lo]) * (idx - static_cast<double>(lo));
}

inline LatencyStats latency_stats(std::vector<double> v) {
  LatencyStats s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  double sum = 0;
  for (double x : v) sum += x;
  s.mean = sum / static_cast<double>(v.size());
  s.p50 = percentile_of_sorted(v, 50);
  s.p90 = percentile_of_sorted(v, 90);
  s.p99 = percentile_of_sorted(v, 99);
  return s;
}

}  // namespace pagoda

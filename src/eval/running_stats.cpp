#include "eval/running_stats.h"

#include <algorithm>

namespace pagoda {

ValueWithError proportion(int64_t hits, int64_t n) {
  if (n <= 0) return {};
  const double p = static_cast<double>(hits) / static_cast<double>(n);
  const double err = n > 1 ? std::sqrt(std::max(0.0, p * (1 - p)) / static_cast<double>(n - 1)) : 0.0;
  return {p, err};
}

double quantile_sorted(std::span<const float> sorted, double fraction) {
  if (sorted.empty()) return 0.0;
  if (fraction <= 0) return sorted.front();
  if (fraction >= 1) return sorted.back();
  const double pos = fraction * static_cast<double>(sorted.size() - 1);
  const size_t i = static_cast<size_t>(pos);
  const double t = pos - static_cast<double>(i);
  const size_t j = std::min(i + 1, sorted.size() - 1);
  return (1 - t) * sorted[i] + t * sorted[j];
}

}  // namespace pagoda

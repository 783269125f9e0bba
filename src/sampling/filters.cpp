#include "sampling/filters.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "sampling/fast_exp.h"

namespace pagoda {

size_t top_p_count(std::span<const TokenLogit> sorted, float p, float max, double z) {
  const double target = static_cast<double>(p) * z;
  double cum = 0;
  for (size_t i = 0; i < sorted.size(); ++i) {
    cum += exp_nonpositive(sorted[i].logit - max);
    if (cum >= target) return i + 1;
  }
  return sorted.size();
}

float min_p_floor(float max, float min_p) {
  return std::min(max, max + std::log(min_p));
}

size_t min_p_count(std::span<const TokenLogit> sorted, float min_p, float max) {
  const float floor = min_p_floor(max, min_p);
  size_t n = 1;
  while (n < sorted.size() && sorted[n].logit >= floor) ++n;
  return n;
}

}  // namespace pagoda

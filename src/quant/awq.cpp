#include "quant/awq.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace pagoda {

std::vector<float> awq_scales(std::span<const float> mean_abs, float alpha) {
  std::vector<float> s(mean_abs.size(), 1.0f);
  if (alpha == 0.0f || mean_abs.empty()) return s;
  float floor = std::numeric_limits<float>::max();
  for (float m : mean_abs)
    if (m > 0) floor = std::min(floor, m);
  if (floor == std::numeric_limits<float>::max()) return s;  // no activity at all
  double lo = std::numeric_limits<double>::max(), hi = 0;
  for (size_t c = 0; c < s.size(); ++c) {
    s[c] = std::pow(std::max(mean_abs[c], floor), alpha);
    lo = std::min<double>(lo, s[c]);
    hi = std::max<double>(hi, s[c]);
  }
  const auto norm = static_cast<float>(std::sqrt(lo * hi));
  for (float& v : s) v /= norm;
  return s;
}

AwqChoice awq_search(std::span<const float> mean_abs, int grid, const std::function<double(std::span<const float>)>& loss) {
  AwqChoice best;
  for (int i = 0; i < std::max(1, grid); ++i) {
    const float alpha = static_cast<float>(i) / static_cast<float>(std::max(1, grid));
    std::vector<float> s = awq_scales(mean_abs, alpha);
    const double l = loss(s);
    if (i == 0) best.loss_rtn = l;
    if (i == 0 || l < best.loss) {
      best.alpha = alpha;
      best.loss = l;
      best.scales = std::move(s);
    }
  }
  return best;
}

}  // namespace pagoda

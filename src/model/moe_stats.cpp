#include "model/moe_stats.h"

#include <fmt/format.h>

#include <algorithm>

namespace pagoda {

void MoeStats::reset(int32_t n_layer, int32_t n_expert, int32_t n_expert_used) {
  n_layer_ = n_layer;
  n_expert_ = n_expert;
  n_expert_used_ = n_expert_used;
  const size_t n = static_cast<size_t>(n_layer) * static_cast<size_t>(n_expert);
  tokens_.assign(n, 0);
  active_steps_.assign(n, 0);
  last_step_.assign(n, 0);
  steps_ = 0;
  routing_seconds_ = forward_seconds_ = 0.0;
}

MoeLayerSummary MoeStats::summary(int32_t layer) const {
  MoeLayerSummary s;
  if (n_expert_ == 0) return s;
  uint64_t sum = 0, max = 0;
  double active = 0.0;
  int32_t used = 0;
  for (int32_t e = 0; e < n_expert_; ++e) {
    const uint64_t t = tokens(layer, e);
    sum += t;
    if (t > max) {
      max = t;
      s.busiest = e;
    }
    used += t > 0;
    if (steps_ > 0) active += static_cast<double>(active_steps(layer, e)) / static_cast<double>(steps_);
  }
  s.tokens = n_expert_used_ > 0 ? sum / static_cast<uint64_t>(n_expert_used_) : 0;
  const double mean = static_cast<double>(sum) / n_expert_;
  s.imbalance = mean > 0 ? static_cast<double>(max) / mean : 0.0;
  s.active_share = active / n_expert_;
  s.used_share = static_cast<double>(used) / n_expert_;
  return s;
}

std::string MoeStats::to_json() const {
  std::string out = fmt::format(R"({{"experts": {}, "experts_used": {}, "steps": {}, "routing_seconds": {:.6f}, )"
                                R"("forward_seconds": {:.6f}, "routing_share": {:.6f}, "layers": [)",
                                n_expert_, n_expert_used_, steps_, routing_seconds_, forward_seconds_, routing_share());
  for (int32_t l = 0; l < n_layer_; ++l) {
    const MoeLayerSummary s = summary(l);
    std::string tok, act;
    for (int32_t e = 0; e < n_expert_; ++e) {
      tok += fmt::format("{}{}", e ? ", " : "", tokens(l, e));
      act += fmt::format("{}{}", e ? ", " : "", active_steps(l, e));
    }
    out += fmt::format(R"({}{{"tokens": [{}], "active_steps": [{}], "imbalance": {:.4f}, "active_share": {:.4f}, )"
                       R"("used_share": {:.4f}}})",
                       l ? ", " : "", tok, act, s.imbalance, s.active_share, s.used_share);
  }
  return out + "]}";
}

std::string MoeStats::to_text() const {
  std::string out = fmt::format("experts: {} per layer, {} per token; {} steps; routing {:.1f}% of forward time\n",
                                n_expert_, n_expert_used_, steps_, 100.0 * routing_share());
  out += "layer   tokens  imbalance  active  used  busiest\n";
  double worst = 0.0, active = 0.0;
  for (int32_t l = 0; l < n_layer_; ++l) {
    const MoeLayerSummary s = summary(l);
    worst = std::max(worst, s.imbalance);
    active += s.active_share;
    out += fmt::format("{:>5} {:>8} {:>10.2f} {:>6.0f}% {:>4.0f}% {:>8}\n", l, s.tokens, s.imbalance,
                       100.0 * s.active_share, 100.0 * s.used_share, s.busiest);
  }
  if (n_layer_ > 0)
    out += fmt::format("worst imbalance {:.2f}, mean active share {:.0f}%\n", worst, 100.0 * active / n_layer_);
  return out;
}

}  // namespace pagoda

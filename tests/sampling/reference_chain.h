// A deliberately plain version of the sampler chain for the tests to compare against:
// full sorts, double precision, llama.cpp's order (top-k, top-p, min-p, temperature).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <span>
#include <vector>

#include "sampling/params.h"

namespace pagoda::testing {

// Token -> probability after the filters and temperature, for logits that already
// carry any penalties.
inline std::map<int32_t, double> reference_distribution(std::span<const float> logits,
                                                        const SamplingParams& p) {
  struct Entry {
    int32_t id;
    double logit;
  };
  std::vector<Entry> c;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (std::isfinite(logits[i])) c.push_back({static_cast<int32_t>(i), logits[i]});
  }
  std::sort(c.begin(), c.end(), [](const Entry& a, const Entry& b) {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
  });
  auto softmax = [&](double temp) {
    std::vector<double> prob(c.size());
    double z = 0;
    for (size_t i = 0; i < c.size(); ++i) z += prob[i] = std::exp((c[i].logit - c[0].logit) / temp);
    for (double& q : prob) q /= z;
    return prob;
  };
  if (p.temperature <= 0) return {{c.front().id, 1.0}};
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < c.size()) c.resize(p.top_k);
  if (p.top_p < 1) {
    const auto prob = softmax(1.0);
    double cum = 0;
    size_t keep = c.size();
    for (size_t i = 0; i < c.size(); ++i) {
      cum += prob[i];
      if (cum >= p.top_p) {
        keep = i + 1;
        break;
      }
    }
    c.resize(keep);
  }
  if (p.min_p > 0) {
    const auto prob = softmax(1.0);
    size_t keep = 1;
    while (keep < c.size() && prob[keep] >= p.min_p * prob[0]) ++keep;
    c.resize(keep);
  }
  const auto prob = softmax(p.temperature);
  std::map<int32_t, double> out;
  for (size_t i = 0; i < c.size(); ++i) out[c[i].id] = prob[i];
  return out;
}

// Parameters with every filter off, to test one stage at a time.
inline SamplingParams plain_params(uint64_t seed = 1) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.seed = seed;
  return p;
}

}  // namespace pagoda::testing

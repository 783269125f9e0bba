// Routing of one token (model/moe_routing.h) against a double-precision softmax and top-k
// by hand, and the expert statistics' counting (model/moe_stats.h).
#include "model/moe_routing.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "model/moe_stats.h"

namespace pagoda {
namespace {

TEST(MoeRouting, PicksTheMostProbableExpertsWithSoftmaxWeights) {
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  for (int32_t n_expert : {4, 8, 64, 128}) {
    for (int32_t k : {1, 2, 8}) {
      if (k > n_expert) continue;
      for (bool norm : {false, true}) {
        std::vector<float> logits(n_expert);
        for (float& v : logits) v = nd(rng);
        std::vector<double> p(logits.begin(), logits.end());
        const double mx = *std::max_element(p.begin(), p.end());
        double sum = 0;
        for (double& v : p) sum += v = std::exp(v - mx);
        for (double& v : p) v /= sum;
        std::vector<int32_t> order(n_expert);
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return p[a] > p[b]; });
        double picked = 0;
        for (int32_t j = 0; j < k; ++j) picked += p[order[j]];
        std::vector<int32_t> ids(k);
        std::vector<float> w(k);
        route_token(logits.data(), n_expert, k, norm, ids.data(), w.data());
        for (int32_t j = 0; j < k; ++j) {
          EXPECT_EQ(ids[j], order[j]) << n_expert << " experts, k " << k << ", pick " << j;
          const double want = norm ? p[order[j]] / picked : p[order[j]];
          EXPECT_NEAR(w[j], want, 1e-6 * want + 1e-9) << n_expert << " experts, k " << k << ", pick " << j;
        }
      }
    }
  }
}

TEST(MoeRouting, EqualProbabilitiesGoToTheLowerExpert) {
  std::vector<float> logits = {1.0f, 3.0f, 3.0f, 1.0f, 3.0f};
  int32_t ids[3];
  float w[3];
  route_token(logits.data(), 5, 3, true, ids, w);
  EXPECT_EQ(ids[0], 1);
  EXPECT_EQ(ids[1], 2);
  EXPECT_EQ(ids[2], 4);
  for (float v : w) EXPECT_FLOAT_EQ(v, 1.0f / 3.0f);
}

TEST(MoeStats, CountsTokensAndActiveStepsPerLayerAndExpert) {
  MoeStats s;
  s.reset(2, 4, 2);
  s.begin_step();
  s.count(0, 1, 3);
  s.count(0, 2, 3);
  s.count(1, 0, 6);
  s.begin_step();
  s.count(0, 1, 1);
  s.count(0, 1, 1);  // the same step: active once
  s.count(0, 3, 2);
  EXPECT_EQ(s.steps(), 2u);
  EXPECT_EQ(s.tokens(0, 1), 5u);
  EXPECT_EQ(s.active_steps(0, 1), 2u);
  EXPECT_EQ(s.active_steps(0, 2), 1u);
  EXPECT_EQ(s.tokens(1, 0), 6u);
  const MoeLayerSummary l0 = s.summary(0);
  EXPECT_EQ(l0.tokens, 5u);  // 10 routings of 2 experts each
  EXPECT_DOUBLE_EQ(l0.imbalance, 5.0 / 2.5);
  EXPECT_EQ(l0.busiest, 1);
  EXPECT_DOUBLE_EQ(l0.used_share, 0.75);
  EXPECT_DOUBLE_EQ(l0.active_share, (0 + 1.0 + 0.5 + 0.5) / 4);
  EXPECT_NE(s.to_json().find(R"("tokens": [0, 5, 3, 2])"), std::string::npos) << s.to_json();
}

}  // namespace
}  // namespace pagoda

#include "kernels/attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "base/fp16.h"

namespace pagoda {
namespace {

// Naive reference: full score row, softmax, weighted sum (double precision).
void naive(const std::vector<float>& q, int64_t n_tokens, int32_t pos0, const std::vector<uint16_t>& k,
           const std::vector<uint16_t>& v, const AttentionParams& p, std::vector<double>& out) {
  const int32_t hd = p.head_dim, group = p.n_heads / p.n_kv_heads;
  out.assign(q.size(), 0.0);
  for (int64_t t = 0; t < n_tokens; ++t) {
    const int32_t pos = pos0 + static_cast<int32_t>(t);
    for (int32_t h = 0; h < p.n_heads; ++h) {
      const int32_t kvh = h / group;
      std::vector<double> s;
      std::vector<int32_t> js;
      for (int32_t j = 0; j <= pos; ++j) {
        if (p.window > 0 && pos - j >= p.window) continue;
        double d = 0;
        for (int32_t i = 0; i < hd; ++i)
          d += fp16_to_fp32(fp32_to_fp16(q[(t * p.n_heads + h) * hd + i])) *
               fp16_to_fp32(k[(static_cast<int64_t>(j) * p.n_kv_heads + kvh) * hd + i]);
        s.push_back(d * p.scale);
        js.push_back(j);
      }
      double mx = -1e300, sum = 0;
      for (double x : s) mx = std::max(mx, x);
      for (double& x : s) sum += (x = std::exp(x - mx));
      // The kernel rounds each probability to FP16 (llama.cpp's numerics); so does this.
      for (size_t a = 0; a < s.size(); ++a)
        for (int32_t i = 0; i < hd; ++i)
          out[(t * p.n_heads + h) * hd + i] +=
              fp16_to_fp32(fp32_to_fp16(static_cast<float>(s[a] / sum))) * fp16_to_fp32(v[(static_cast<int64_t>(js[a]) * p.n_kv_heads + kvh) * hd + i]);
    }
  }
}

struct Case {
  int32_t heads, kv_heads, head_dim, window, pos0, n_tokens;
};

class AttentionTest : public ::testing::TestWithParam<Case> {};

TEST_P(AttentionTest, MatchesNaiveSoftmax) {
  const Case c = GetParam();
  AttentionParams p{c.heads, c.kv_heads, c.head_dim, 1.0f / std::sqrt(static_cast<float>(c.head_dim)), c.window};
  const int32_t total = c.pos0 + c.n_tokens;
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> q(static_cast<size_t>(c.n_tokens) * c.heads * c.head_dim);
  for (float& x : q) x = nd(rng) * 2.0f;
  std::vector<uint16_t> k(static_cast<size_t>(total) * c.kv_heads * c.head_dim), v(k.size());
  for (auto& x : k) x = fp32_to_fp16(nd(rng));
  for (auto& x : v) x = fp32_to_fp16(nd(rng));
  std::vector<float> out(q.size());
  ThreadPool pool(2);
  attention_causal(q.data(), c.n_tokens, c.pos0, k.data(), v.data(), p, out.data(), pool);
  std::vector<double> ref;
  naive(q, c.n_tokens, c.pos0, k, v, p, ref);
  // Outputs are convex combinations of unit-variance values: float rounding of the
  // running sums stays far below 1e-4 for these lengths.
  for (size_t i = 0; i < out.size(); ++i) ASSERT_NEAR(out[i], ref[i], 1e-4) << i;
}

INSTANTIATE_TEST_SUITE_P(Shapes, AttentionTest,
                         ::testing::Values(Case{4, 4, 16, 0, 0, 9},     // MHA prefill
                                           Case{8, 2, 32, 0, 5, 1},     // GQA decode
                                           Case{4, 1, 64, 0, 3, 6},     // MQA chunk after a prefix
                                           Case{4, 2, 16, 4, 0, 12},    // sliding window
                                           Case{2, 1, 256, 8, 20, 3})); // window, wide heads

}  // namespace
}  // namespace pagoda

#include "kernels/attention/attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "base/fp16.h"
#include "kernels/attention/attention_kernels.h"

namespace pagoda {
namespace {

// Naive reference (double precision) with a per-output error bound for the kernel.
//
// The kernel follows the contract of attention.h: q rounded to FP16, q.k summed in float,
// exp, a double sum, probabilities rounded to FP16, values accumulated in float. Against
// exact arithmetic it errs in three places, and `tol` adds them up:
//  * A score s_j = scale * sum_i q_i k_i is a float sum of exact products, off by at most
//    hd * u * scale * sum_i |q_i k_i| (u = 2^-24), plus u |s_j| for the scale. Through
//    s_j - max, expf (1 ulp) and the normalisation, the probability before its FP16
//    rounding is off by a relative eps_j = d_j + max_k d_k + 3u, d_j the error of s_j - max.
//    Where that interval straddles an FP16 rounding boundary the kernel may land one FP16
//    ulp away from the reference: that ulp times |v_ji| joins the bound (twice eps_j is
//    used, for the second-order terms).
//  * The output is a float sum of len products: at most len * u * sum_j w_j |v_ji|.
// The bound holds for every body whatever its summation order; it is tight where a
// probability sits near a rounding boundary (a flip of a large one moves an output by ~1e-4).
struct Reference {
  std::vector<double> out, tol;
};

Reference naive(const std::vector<float>& q, int64_t n_tokens, int32_t pos0, const std::vector<uint16_t>& k,
                const std::vector<uint16_t>& v, const AttentionParams& p) {
  constexpr double u = 1.0 / (1 << 24);
  const int32_t hd = p.head_dim, group = p.n_heads / p.n_kv_heads;
  Reference r;
  r.out.assign(q.size(), 0.0);
  r.tol.assign(q.size(), 1e-6);
  std::vector<double> kd(k.size()), vd(v.size());
  for (size_t i = 0; i < k.size(); ++i) kd[i] = fp16_to_fp32(k[i]);
  for (size_t i = 0; i < v.size(); ++i) vd[i] = fp16_to_fp32(v[i]);
  std::vector<double> qh(hd), s, err;
  std::vector<int32_t> js;
  auto half = [](double x) { return static_cast<double>(fp16_to_fp32(fp32_to_fp16(static_cast<float>(x)))); };
  for (int64_t t = 0; t < n_tokens; ++t) {
    const int32_t pos = pos0 + static_cast<int32_t>(t);
    for (int32_t h = 0; h < p.n_heads; ++h) {
      const int32_t kvh = h / group;
      for (int32_t i = 0; i < hd; ++i) qh[i] = fp16_to_fp32(fp32_to_fp16(q[(t * p.n_heads + h) * hd + i]));
      s.clear();
      err.clear();
      js.clear();
      for (int32_t j = 0; j <= pos; ++j) {
        if (p.window > 0 && pos - j >= p.window) continue;
        const double* kr = &kd[(static_cast<int64_t>(j) * p.n_kv_heads + kvh) * hd];
        double d = 0, mag = 0;
        for (int32_t i = 0; i < hd; ++i) {
          d += qh[i] * kr[i];
          mag += std::fabs(qh[i] * kr[i]);
        }
        double sj = d * p.scale, ej = hd * u * p.scale * mag + u * std::fabs(sj);
        if (p.softcap > 0) {
          // cap * tanh(s / cap) has slope <= 1, so the score's error carries over at most
          // as is; the kernel's float 1 / cap, the product, tanh's rounding and the times
          // cap add four roundings of the capped score.
          sj = p.softcap * std::tanh(sj / p.softcap);
          ej += 4 * u * std::fabs(sj);
        }
        s.push_back(sj);
        err.push_back(ej);
        js.push_back(j);
      }
      const size_t imax = static_cast<size_t>(std::max_element(s.begin(), s.end()) - s.begin());
      const double mx = s[imax];
      double sum = 0, dmax = 0;
      std::vector<double> e(s.size());
      for (size_t a = 0; a < s.size(); ++a) {
        e[a] = err[a] + err[imax] + u * std::fabs(s[a] - mx) + 2 * u;  // + expf's ulp
        dmax = std::max(dmax, e[a]);
        sum += (s[a] = std::exp(s[a] - mx));
      }
      double* o = &r.out[(t * p.n_heads + h) * hd];
      double* tl = &r.tol[(t * p.n_heads + h) * hd];
      const double gamma = static_cast<double>(s.size()) * u;
      for (size_t a = 0; a < s.size(); ++a) {
        const double exact = s[a] / sum;
        const double w = half(exact);
        const double eps = 2 * (e[a] + dmax + 3 * u);
        const double flip = half(exact * (1 + eps)) - half(exact * (1 - eps));
        const double* vr = &vd[(static_cast<int64_t>(js[a]) * p.n_kv_heads + kvh) * hd];
        for (int32_t i = 0; i < hd; ++i) {
          o[i] += w * vr[i];
          tl[i] += (flip + gamma * w) * std::fabs(vr[i]);
        }
      }
    }
  }
  return r;
}

struct Case {
  int32_t heads, kv_heads, head_dim, window, pos0, n_tokens;
  int32_t softcap = 0;  // Gemma 2's attention soft cap (0: none)
};

std::string case_name(const Case& c) {
  char buf[96];
  std::snprintf(buf, sizeof(buf), "h%d_kv%d_d%d_w%d_p%d_n%d", c.heads, c.kv_heads, c.head_dim, c.window, c.pos0,
                c.n_tokens);
  return c.softcap > 0 ? std::string(buf) + "_cap" + std::to_string(c.softcap) : std::string(buf);
}

struct Inputs {
  AttentionParams p;
  std::vector<float> q;
  std::vector<uint16_t> k, v;
};

Inputs make_inputs(const Case& c) {
  Inputs in;
  in.p = AttentionParams{c.heads, c.kv_heads, c.head_dim, 1.0f / std::sqrt(static_cast<float>(c.head_dim)), c.window,
                         static_cast<float>(c.softcap)};
  const int32_t total = c.pos0 + c.n_tokens;
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  in.q.resize(static_cast<size_t>(c.n_tokens) * c.heads * c.head_dim);
  for (float& x : in.q) x = nd(rng) * 2.0f;
  in.k.resize(static_cast<size_t>(total) * c.kv_heads * c.head_dim);
  in.v.resize(in.k.size());
  for (auto& x : in.k) x = fp32_to_fp16(nd(rng));
  for (auto& x : in.v) x = fp32_to_fp16(nd(rng));
  return in;
}

// Every body this CPU runs (scalar, avx2, avx512), through the same front.
std::vector<std::pair<std::string, attn::Body>> bodies(int32_t head_dim) {
  std::vector<std::pair<std::string, attn::Body>> out;
  for (SimdTarget s : runnable_simd_targets()) {
    const attn::Body b = attn::body_for(s, head_dim);
    if (std::none_of(out.begin(), out.end(), [&](const auto& e) { return e.second == b; }))
      out.emplace_back(simd_target_name(s), b);
  }
  return out;
}

class AttentionTest : public ::testing::TestWithParam<Case> {};

// Each body against the reference, within the bound derived in naive().
TEST_P(AttentionTest, EveryBodyMatchesNaiveSoftmax) {
  const Case c = GetParam();
  const Inputs in = make_inputs(c);
  const Reference ref = naive(in.q, c.n_tokens, c.pos0, in.k, in.v, in.p);
  ThreadPool pool(2);
  for (const auto& [name, body] : bodies(c.head_dim)) {
    std::vector<float> out(in.q.size());
    attn::run(body, in.q.data(), c.n_tokens, c.pos0, in.k.data(), in.v.data(), in.p, out.data(), pool);
    double worst = 0, worst_ratio = 0;
    for (size_t i = 0; i < out.size(); ++i) {
      ASSERT_NEAR(out[i], ref.out[i], ref.tol[i]) << name << " at " << i;
      worst = std::max(worst, std::fabs(out[i] - ref.out[i]));
      worst_ratio = std::max(worst_ratio, std::fabs(out[i] - ref.out[i]) / ref.tol[i]);
    }
    RecordProperty(name + "_max_error", std::to_string(worst));
    RecordProperty(name + "_max_error_over_bound", std::to_string(worst_ratio));
  }
}

// The public entry point is the best body, and results do not depend on the number of
// threads (each head's sums run in one fixed order whatever the split).
TEST_P(AttentionTest, EntryPointIsDeterministicAcrossThreadCounts) {
  const Case c = GetParam();
  const Inputs in = make_inputs(c);
  std::vector<float> a(in.q.size()), b(in.q.size()), d(in.q.size());
  ThreadPool one(1), three(3);
  attention_causal(in.q.data(), c.n_tokens, c.pos0, in.k.data(), in.v.data(), in.p, a.data(), one);
  attention_causal(in.q.data(), c.n_tokens, c.pos0, in.k.data(), in.v.data(), in.p, b.data(), three);
  attn::run(attn::body_for(runnable_simd_targets().back(), c.head_dim), in.q.data(), c.n_tokens, c.pos0,
            in.k.data(), in.v.data(), in.p, d.data(), one);
  ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
  ASSERT_EQ(std::memcmp(a.data(), d.data(), a.size() * sizeof(float)), 0);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, AttentionTest,
    ::testing::Values(Case{4, 4, 16, 0, 0, 9},        // MHA prefill
                      Case{8, 2, 32, 0, 5, 1},        // GQA decode
                      Case{4, 1, 64, 0, 3, 6},        // MQA chunk after a prefix
                      Case{4, 2, 16, 4, 0, 12},       // sliding window
                      Case{2, 1, 256, 8, 20, 3},      // window, wide heads
                      Case{8, 8, 64, 0, 4095, 1},     // GQA 1, decode at 4096
                      Case{32, 8, 64, 0, 4090, 6},    // GQA 4 (Llama 1B shape), chunk ending at 4096
                      Case{16, 2, 128, 0, 4088, 8},   // GQA 8, head_dim 128
                      Case{8, 2, 256, 0, 2047, 1},    // GQA 4, head_dim 256 decode
                      Case{4, 1, 256, 512, 3000, 17}, // Gemma 3 local layer: MQA-like, window 512
                      Case{8, 1, 128, 1024, 4080, 16},// GQA 8 with a window, near 4096
                      Case{8, 2, 64, 0, 0, 200},      // prefill from empty: full causal triangle
                      Case{14, 2, 64, 0, 40, 64},     // GQA 7 (Qwen2 0.5B): head blocks 4 + 2 + 1
                      Case{12, 4, 80, 0, 100, 20},    // head_dim 80: avx512 falls back to the avx2 body
                      Case{6, 2, 72, 0, 50, 3},       // head_dim 72
                      Case{2, 2, 20, 0, 10, 4},       // head_dim 20: scalar only
                      Case{32, 1, 64, 0, 100, 1},     // 32 heads on one KV head, decode: rows in lanes
                      Case{24, 1, 128, 0, 7, 5},      // 24 rows a token: two lane groups, one partial
                      Case{3, 1, 64, 16, 40, 33},     // GQA 3: blocks of 5 tokens, 15 rows, window
                      // Soft-capped scores (Gemma 2): caps that bend these scores (q is
                      // 2x a unit normal, so scores reach ~6) in every path: prefill rows
                      // in lanes, decode, a window, a tiled long context and its split decode.
                      Case{8, 4, 32, 0, 0, 40, 2},    // prefill from empty, cap 2
                      Case{8, 4, 256, 16, 30, 5, 3},  // Gemma 2 2B's heads: a local layer chunk
                      Case{8, 4, 64, 0, 90, 1, 1},    // GQA 2 decode, cap 1
                      Case{16, 1, 64, 0, 10, 1, 2},   // 16 heads on one KV head, decode: rows in lanes
                      Case{4, 2, 64, 0, 3000, 9, 4},  // tiled: chunk ending past 3000 keys
                      Case{8, 8, 64, 0, 4095, 1, 4}), // tiled, split-KV decode at 4096
    [](const auto& info) { return case_name(info.param); });

}  // namespace
}  // namespace pagoda

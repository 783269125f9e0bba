#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "base/fp16.h"

namespace pagoda {

void attention_causal(const float* q, int64_t n_tokens, int32_t pos0, const uint16_t* k,
                      const uint16_t* v, const AttentionParams& p, float* out, ThreadPool& pool) {
  const int32_t hd = p.head_dim;
  const int64_t q_stride = static_cast<int64_t>(p.n_heads) * hd;
  const int64_t kv_stride = static_cast<int64_t>(p.n_kv_heads) * hd;
  const int32_t group = p.n_heads / p.n_kv_heads;
  pool.parallel_for(n_tokens * p.n_heads, 1, [&](int64_t b, int64_t e, int) {
    // Per-thread scratch: one row of scores (linear in context), reused across calls.
    thread_local std::vector<float> scores;
    thread_local std::vector<float> qh, acc;
    qh.resize(hd);
    acc.resize(hd);
    for (int64_t job = b; job < e; ++job) {
      const int64_t t = job / p.n_heads;
      const int32_t h = static_cast<int32_t>(job % p.n_heads);
      const int32_t kvh = h / group;
      const int32_t pos = pos0 + static_cast<int32_t>(t);
      const int32_t lo = p.window > 0 ? std::max(0, pos - p.window + 1) : 0;
      const int32_t len = pos - lo + 1;
      scores.resize(static_cast<size_t>(len));
      // Q is rounded to FP16 like the cached K it meets, as llama.cpp does.
      const float* qs = q + t * q_stride + static_cast<int64_t>(h) * hd;
      for (int32_t i = 0; i < hd; ++i) qh[i] = fp16_to_fp32(fp32_to_fp16(qs[i]));
      float m = -INFINITY;
      for (int32_t j = lo; j <= pos; ++j) {
        const uint16_t* kr = k + j * kv_stride + static_cast<int64_t>(kvh) * hd;
        float s = 0.0f;
        for (int32_t i = 0; i < hd; ++i) s += qh[i] * fp16_to_fp32(kr[i]);
        s *= p.scale;
        scores[j - lo] = s;
        m = std::max(m, s);
      }
      double sum = 0.0;
      for (int32_t j = 0; j < len; ++j) {
        scores[j] = std::exp(scores[j] - m);
        sum += scores[j];
      }
      // Probabilities are rounded to FP16 before weighting the FP16 values, matching
      // llama.cpp's V x softmax product so greedy outputs agree token for token.
      const float inv = static_cast<float>(1.0 / sum);
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int32_t j = 0; j < len; ++j) {
        const float w = fp16_to_fp32(fp32_to_fp16(scores[j] * inv));
        const uint16_t* vr = v + (lo + j) * kv_stride + static_cast<int64_t>(kvh) * hd;
        for (int32_t i = 0; i < hd; ++i) acc[i] += w * fp16_to_fp32(vr[i]);
      }
      float* o = out + t * q_stride + static_cast<int64_t>(h) * hd;
      for (int32_t i = 0; i < hd; ++i) o[i] = acc[i];
    }
  });
}

}  // namespace pagoda

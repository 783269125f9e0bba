// The shared forward pass of every supported architecture: a pre-norm decoder whose
// optional pieces (QKV bias, QK-norm, post-norms, embedding scale, sliding windows) come
// from the config and the bound weights. Explicit code over the kernels, no graph.
#include <algorithm>
#include <cstring>

#include "base/fp16.h"
#include "kernels/attention.h"
#include "kernels/elementwise.h"
#include "kernels/matmul.h"
#include "kernels/rope.h"
#include "model/model.h"

namespace pagoda {
namespace {

// Prompts are processed in chunks of this many tokens so scratch memory stays bounded.
constexpr int64_t kMaxChunk = 512;

void add_bias(float* y, const float* b, int64_t n_tokens, int64_t dim) {
  if (b == nullptr) return;
  for (int64_t t = 0; t < n_tokens; ++t) add_inplace(y + t * dim, b, dim);
}

}  // namespace

void Model::ensure_scratch(int64_t n) {
  if (n <= scratch_tokens_) return;
  const ModelConfig& c = config_;
  x_.resize(n * c.n_embd);
  xn_.resize(n * c.n_embd);
  q_.resize(n * c.q_dim());
  k_.resize(n * c.kv_dim());
  v_.resize(n * c.kv_dim());
  att_.resize(n * c.q_dim());
  proj_.resize(n * c.n_embd);
  gate_.resize(n * c.n_ff);
  up_.resize(n * c.n_ff);
  last_.resize(c.n_embd);
  scratch_tokens_ = n;
}

Status Model::forward(std::span<const int32_t> tokens, int32_t pos0, KvCache& kv, float* logits, bool all_logits) {
  const ModelConfig& c = config_;
  if (tokens.empty()) return error("forward: no tokens");
  for (int32_t t : tokens)
    if (t < 0 || t >= c.n_vocab) return error("token id {} is outside the vocabulary (0..{})", t, c.n_vocab - 1);
  if (pos0 < 0 || static_cast<int64_t>(pos0) + static_cast<int64_t>(tokens.size()) > kv.n_ctx())
    return error("{} tokens at position {} do not fit in the context of {} tokens", tokens.size(), pos0, kv.n_ctx());
  if (kv.kv_dim() != c.kv_dim()) return error("KV cache width {} does not match the model's {}", kv.kv_dim(), c.kv_dim());
  const int64_t n = static_cast<int64_t>(tokens.size());
  for (int64_t s = 0; s < n; s += kMaxChunk) {
    const int64_t len = std::min(kMaxChunk, n - s);
    const bool last_chunk = s + len == n;
    float* out = nullptr;
    if (all_logits) out = logits + s * c.n_vocab;
    else if (last_chunk) out = logits;
    forward_chunk(tokens.data() + s, len, pos0 + static_cast<int32_t>(s), kv, out, all_logits);
  }
  return Status::ok();
}

void Model::forward_chunk(const int32_t* tokens, int64_t n, int32_t pos0, KvCache& kv, float* logits,
                          bool all_logits) {
  const ModelConfig& c = config_;
  ThreadPool& pool = *pool_;
  ensure_scratch(n);
  const int64_t E = c.n_embd;
  for (int64_t t = 0; t < n; ++t) {
    dequantize_weight_row(weights_.tok_embd, tokens[t], &x_[t * E]);
    if (c.embed_scale != 1.0f) scale_inplace(&x_[t * E], c.embed_scale, E);
  }
  for (int32_t l = 0; l < c.n_layer; ++l) {
    const LayerWeights& L = weights_.layers[l];
    const bool local = c.layer_is_local[l];
    const RopeParams& rope = local ? c.rope_local : c.rope;
    // Attention.
    for (int64_t t = 0; t < n; ++t) rms_norm(&x_[t * E], L.attn_norm, E, c.rms_eps, &xn_[t * E]);
    matmul(L.wq, xn_.data(), n, q_.data(), pool);
    matmul(L.wk, xn_.data(), n, k_.data(), pool);
    matmul(L.wv, xn_.data(), n, v_.data(), pool);
    add_bias(q_.data(), L.bq, n, c.q_dim());
    add_bias(k_.data(), L.bk, n, c.kv_dim());
    add_bias(v_.data(), L.bv, n, c.kv_dim());
    uint16_t* kc = kv.k(l);
    uint16_t* vc = kv.v(l);
    for (int64_t t = 0; t < n; ++t) {
      float* qt = &q_[t * c.q_dim()];
      float* kt = &k_[t * c.kv_dim()];
      if (L.q_norm != nullptr) {
        for (int32_t h = 0; h < c.n_head; ++h) rms_norm(qt + h * c.head_dim, L.q_norm, c.head_dim, c.rms_eps, qt + h * c.head_dim);
        for (int32_t h = 0; h < c.n_head_kv; ++h)
          rms_norm(kt + h * c.head_dim, L.k_norm, c.head_dim, c.rms_eps, kt + h * c.head_dim);
      }
      const int32_t pos = pos0 + static_cast<int32_t>(t);
      rope_apply(qt, c.n_head, c.head_dim, pos, rope);
      rope_apply(kt, c.n_head_kv, c.head_dim, pos, rope);
      uint16_t* kd = kc + static_cast<int64_t>(pos) * c.kv_dim();
      uint16_t* vd = vc + static_cast<int64_t>(pos) * c.kv_dim();
      const float* vt = &v_[t * c.kv_dim()];
      for (int32_t i = 0; i < c.kv_dim(); ++i) {
        kd[i] = fp32_to_fp16(kt[i]);
        vd[i] = fp32_to_fp16(vt[i]);
      }
    }
    AttentionParams ap;
    ap.n_heads = c.n_head;
    ap.n_kv_heads = c.n_head_kv;
    ap.head_dim = c.head_dim;
    ap.scale = c.attn_scale;
    ap.window = local ? c.sliding_window : 0;
    attention_causal(q_.data(), n, pos0, kc, vc, ap, att_.data(), pool);
    matmul(L.wo, att_.data(), n, proj_.data(), pool);
    if (L.post_attn_norm != nullptr)
      for (int64_t t = 0; t < n; ++t) rms_norm(&proj_[t * E], L.post_attn_norm, E, c.rms_eps, &proj_[t * E]);
    add_inplace(x_.data(), proj_.data(), n * E);
    // Feed-forward.
    for (int64_t t = 0; t < n; ++t) rms_norm(&x_[t * E], L.ffn_norm, E, c.rms_eps, &xn_[t * E]);
    matmul(L.gate, xn_.data(), n, gate_.data(), pool);
    matmul(L.up, xn_.data(), n, up_.data(), pool);
    if (c.act == FfnActivation::kGeluTanh) geglu(gate_.data(), up_.data(), n * c.n_ff);
    else swiglu(gate_.data(), up_.data(), n * c.n_ff);
    matmul(L.down, gate_.data(), n, proj_.data(), pool);
    if (L.post_ffw_norm != nullptr)
      for (int64_t t = 0; t < n; ++t) rms_norm(&proj_[t * E], L.post_ffw_norm, E, c.rms_eps, &proj_[t * E]);
    add_inplace(x_.data(), proj_.data(), n * E);
  }
  if (logits == nullptr) return;
  if (all_logits) {
    for (int64_t t = 0; t < n; ++t) rms_norm(&x_[t * E], weights_.output_norm, E, c.rms_eps, &xn_[t * E]);
    matmul(weights_.output, xn_.data(), n, logits, pool);
  } else {
    rms_norm(&x_[(n - 1) * E], weights_.output_norm, E, c.rms_eps, last_.data());
    matmul(weights_.output, last_.data(), 1, logits, pool);
  }
}

}  // namespace pagoda

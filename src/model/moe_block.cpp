// The mixture-of-experts FFN of one layer, as llama.cpp's build_moe_ffn computes it for
// the softmax-gated architectures (Mixtral, Qwen2-MoE, Qwen3-MoE, OLMoE), grouped by
// expert: the step's tokens are routed, each selected expert's rows are gathered into one
// block, and every selected expert's gate/up and then down run in one parallel region
// (matmul_jobs), so each expert's matrices are read once per step for all its tokens and
// a decode reads only its k experts.
//
// Under tensor parallelism (model/parallel.h) every expert is split as the dense FFN is:
// this rank holds rows ffn_exp of each expert's gate and up, and rows embd of its down.
// The router runs whole on every rank, so all route alike; the k rows per token of SwiGLU
// output are gathered whole before the down projections, and their outputs after, so every
// value is the one-process dot product and the sum over experts runs in the same order.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "kernels/elementwise/elementwise.h"
#include "model/for_each_token.h"
#include "model/model.h"
#include "model/moe_routing.h"

namespace pagoda {

Status Model::moe_block(int32_t l, int64_t n) {
  const ModelConfig& c = config_;
  ThreadPool& pool = *pool_;
  const LayerWeights& L = weights_.layers[l];
  const bool tp = split_.tensor_parallel();
  const size_t me = static_cast<size_t>(split_.tp_rank);
  // This process's rows of each expert's gate and up (all of them without a split).
  const int64_t E = c.n_embd, F = tp ? split_.ffn_exp[me].size() : c.n_ff_exp, X = c.n_expert;
  const int32_t k = c.n_expert_used;
  const float* in = L.ffn_norm != nullptr ? xn_.data() : x_.data();
  if (observer_) observer_(l, LinearInput::kFfn, in, n, E, -1);

  // Routing: the router's logits, each token's k experts and weights, then the rows of
  // each expert's block (tokens in order within an expert).
  const bool stats = moe_stats_on_;
  const auto t0 = stats ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  matmul(L.router, in, n, router_logits_.data(), pool);
  for_each_token(pool, n, X, [&](int64_t t) {
    route_token(&router_logits_[t * X], static_cast<int32_t>(X), k, c.expert_norm_weights, &moe_ids_[t * k],
                &moe_weights_[t * k]);
  });
  if (routing_observer_) routing_observer_(l, n, moe_ids_.data());
  moe_offsets_.assign(static_cast<size_t>(X) + 1, 0);
  for (int64_t i = 0; i < n * k; ++i) ++moe_offsets_[moe_ids_[i] + 1];
  for (int64_t e = 0; e < X; ++e) {
    if (stats && moe_offsets_[e + 1] > 0) moe_stats_.count(l, static_cast<int32_t>(e), static_cast<uint64_t>(moe_offsets_[e + 1]));
    moe_offsets_[e + 1] += moe_offsets_[e];
  }
  // Each expert's next free row, handed out in token order.
  moe_cursor_.assign(moe_offsets_.begin(), moe_offsets_.end() - 1);
  for (int64_t i = 0; i < n * k; ++i) moe_rows_[i] = moe_cursor_[moe_ids_[i]]++;
  if (stats) moe_stats_.add_routing_seconds(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  for_each_token(pool, n, k * E, [&](int64_t t) {
    for (int32_t j = 0; j < k; ++j) std::memcpy(&moe_x_[moe_rows_[t * k + j] * E], &in[t * E], sizeof(float) * E);
  });

  // Every selected expert's gate and up over its block, then SwiGLU, then down.
  moe_jobs_.clear();
  for (int64_t e = 0; e < X; ++e) {
    const int64_t r0 = moe_offsets_[e], count = moe_offsets_[e + 1] - r0;
    if (count == 0) continue;
    moe_jobs_.push_back(MatmulJob{&L.gate_exps[e], &moe_x_[r0 * E], count, &moe_gate_[r0 * F]});
    moe_jobs_.push_back(MatmulJob{&L.up_exps[e], &moe_x_[r0 * E], count, &moe_up_[r0 * F]});
  }
  matmul_jobs(moe_jobs_, pool);
  for_each_token(pool, n * k, F, [&](int64_t r) { swiglu(&moe_gate_[r * F], &moe_up_[r * F], F); });
  if (observer_) {
    for (int64_t e = 0; e < X; ++e) {
      const int64_t r0 = moe_offsets_[e], count = moe_offsets_[e + 1] - r0;
      if (count == 0) continue;
      observer_(l, LinearInput::kFfn, &moe_x_[r0 * E], count, E, static_cast<int32_t>(e));
      observer_(l, LinearInput::kFfnDown, &moe_gate_[r0 * F], count, F, static_cast<int32_t>(e));
    }
  }
  // The shared expert's gate and up (Qwen2-MoE), then every down projection.
  const bool shared = !L.gate_shexp.empty();
  const int64_t S = !shared ? 0 : tp ? split_.ffn_shexp[me].size() : c.n_ff_shexp;
  if (shared) {
    const WeightView* ws[] = {&L.gate_shexp, &L.up_shexp};
    float* ys[] = {gate_.data(), up_.data()};
    matmul_shared_input(ws, in, n, ys, pool);
    for_each_token(pool, n, S, [&](int64_t t) { swiglu(&gate_[t * S], &up_[t * S], S); });
    if (observer_) observer_(l, LinearInput::kFfnDown, gate_.data(), n, S, -1);
  }
  if (tp) {
    PAGODA_TRY(moe_down_split(l, n, S));
  } else {
    moe_jobs_.clear();
    for (int64_t e = 0; e < X; ++e) {
      const int64_t r0 = moe_offsets_[e], count = moe_offsets_[e + 1] - r0;
      if (count > 0) moe_jobs_.push_back(MatmulJob{&L.down_exps[e], &moe_gate_[r0 * F], count, &moe_down_[r0 * E]});
    }
    matmul_jobs(moe_jobs_, pool);
    if (shared) matmul(L.down_shexp, gate_.data(), n, proj_.data(), pool);  // its share, into proj_
  }

  // Each token's experts summed in the order they were selected (llama.cpp's order), then
  // the shared expert's part (in proj_) added, scaled by its gate.
  for_each_token(pool, n, k * E, [&](int64_t t) {
    float* p = &proj_[t * E];
    const float* w = &moe_weights_[t * k];
    const int32_t* rows = &moe_rows_[t * k];
    float gate = 0.0f;
    if (shared) {
      float dot = 0.0f;
      for (int64_t i = 0; i < E; ++i) dot += L.shexp_gate[i] * in[t * E + i];
      gate = 1.0f / (1.0f + std::exp(-dot));
    }
    const float* d0 = &moe_down_[rows[0] * E];
    for (int64_t i = 0; i < E; ++i) {
      float acc = d0[i] * w[0];
      for (int32_t j = 1; j < k; ++j) acc += moe_down_[rows[j] * E + i] * w[j];
      p[i] = shared ? acc + p[i] * gate : acc;
    }
  });
  const LayerWeights* next = l + 1 < c.n_layer ? &weights_.layers[l + 1] : nullptr;
  residual_add(nullptr, L.post_ffw_norm, nullptr, nullptr, next != nullptr ? next->attn_norm : nullptr,
               next != nullptr ? next->attn_norm_b : nullptr, n);
  return Status::ok();
}

// Under tensor parallelism, the down projections of layer l's experts and shared expert:
// one gather brings every rank's SwiGLU columns of both (the k rows of each token, then
// the shared expert's n rows of its S local columns), the local rows of every down
// projection run, and one gather brings their outputs back whole into moe_down_ and
// proj_: two synchronizations where gathering each matrix's input and output would take
// four. Each rank's part travels as one flat block.
Status Model::moe_down_split(int32_t l, int64_t n, int64_t S) {
  const ModelConfig& c = config_;
  const LayerWeights& L = weights_.layers[l];
  const size_t me = static_cast<size_t>(split_.tp_rank);
  const bool shared = S > 0;
  const int64_t routed = n * c.n_expert_used, FF = c.n_ff_exp, SS = shared ? c.n_ff_shexp : 0, E = c.n_embd;
  const int64_t F = split_.ffn_exp[me].size(), Eo = split_.embd[me].size();
  auto copy_columns = [](const float* src, int64_t rows, int64_t width, float* dst, int64_t stride) {
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(dst + r * stride, src + r * width, static_cast<size_t>(width) * sizeof(float));
  };
  // tp_in_ and tp_out_ take turns as the send and receive buffers (Model::tp_scratch_bytes).
  float* send = tp_in_.data();
  std::memcpy(send, moe_gate_.data(), static_cast<size_t>(routed * F) * sizeof(float));
  if (shared) std::memcpy(send + routed * F, gate_.data(), static_cast<size_t>(n * S) * sizeof(float));
  counts_.clear();
  for (size_t r = 0; r < split_.ffn_exp.size(); ++r)
    counts_.push_back(routed * split_.ffn_exp[r].size() + (shared ? n * split_.ffn_shexp[r].size() : 0));
  PAGODA_TRY(comm_->gather_columns(send, 1, counts_, tp_out_.data()));
  // The whole inputs: routed x FF, then n x SS.
  float* xin = tp_in_.data();
  float* shared_in = xin + routed * FF;
  const float* src = tp_out_.data();
  for (size_t r = 0; r < split_.ffn_exp.size(); ++r) {
    const Range fe = split_.ffn_exp[r];
    copy_columns(src, routed, fe.size(), xin + fe.begin, FF);
    src += routed * fe.size();
    if (shared) {
      const Range fs = split_.ffn_shexp[r];
      copy_columns(src, n, fs.size(), shared_in + fs.begin, SS);
      src += n * fs.size();
    }
  }
  // This rank's rows of every output: routed x Eo, then n x Eo.
  float* yout = tp_out_.data();
  moe_jobs_.clear();
  for (int64_t e = 0; e < c.n_expert; ++e) {
    const int64_t r0 = moe_offsets_[e], count = moe_offsets_[e + 1] - r0;
    if (count > 0) moe_jobs_.push_back(MatmulJob{&L.down_exps[e], &xin[r0 * FF], count, &yout[r0 * Eo]});
  }
  matmul_jobs(moe_jobs_, *pool_);
  // Through matmul, as one process runs it, so its values are one process's.
  if (shared) matmul(L.down_shexp, shared_in, n, yout + routed * Eo, *pool_);
  const int64_t out_rows = routed + (shared ? n : 0);
  counts_.clear();
  for (const Range& r : split_.embd) counts_.push_back(out_rows * r.size());
  PAGODA_TRY(comm_->gather_columns(yout, 1, counts_, tp_in_.data()));
  src = tp_in_.data();
  for (const Range& r : split_.embd) {
    copy_columns(src, routed, r.size(), moe_down_.data() + r.begin, E);
    if (shared) copy_columns(src + routed * r.size(), n, r.size(), proj_.data() + r.begin, E);
    src += out_rows * r.size();
  }
  return Status::ok();
}

}  // namespace pagoda

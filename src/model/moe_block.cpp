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
  // The down projections: split, their whole input gathered first and their rows of the
  // output gathered after.
  const float* down_in = moe_gate_.data();
  float* down_out = moe_down_.data();
  const int64_t routed = n * k, Fin = tp ? c.n_ff_exp : F, Eout = tp ? split_.embd[me].size() : E;
  if (tp) {
    counts_.clear();
    for (const Range& r : split_.ffn_exp) counts_.push_back(r.size());
    PAGODA_TRY(comm_->gather_columns(moe_gate_.data(), routed, counts_, tp_in_.data()));
    down_in = tp_in_.data();
    down_out = tp_out_.data();
  }
  moe_jobs_.clear();
  for (int64_t e = 0; e < X; ++e) {
    const int64_t r0 = moe_offsets_[e], count = moe_offsets_[e + 1] - r0;
    if (count > 0) moe_jobs_.push_back(MatmulJob{&L.down_exps[e], &down_in[r0 * Fin], count, &down_out[r0 * Eout]});
  }
  matmul_jobs(moe_jobs_, pool);
  if (tp) {
    counts_.clear();
    for (const Range& r : split_.embd) counts_.push_back(r.size());
    PAGODA_TRY(comm_->gather_columns(tp_out_.data(), routed, counts_, moe_down_.data()));
  }

  // The shared expert (Qwen2-MoE) into proj_, each token's share scaled by its gate.
  const bool shared = !L.gate_shexp.empty();
  if (shared) {
    const int64_t S = tp ? split_.ffn_shexp[me].size() : c.n_ff_shexp;
    const WeightView* ws[] = {&L.gate_shexp, &L.up_shexp};
    float* ys[] = {gate_.data(), up_.data()};
    matmul_shared_input(ws, in, n, ys, pool);
    for_each_token(pool, n, S, [&](int64_t t) { swiglu(&gate_[t * S], &up_[t * S], S); });
    if (observer_) observer_(l, LinearInput::kFfnDown, gate_.data(), n, S, -1);
    PAGODA_TRY(row_split_matmul(L.down_shexp, gate_.data(), split_.ffn_shexp, n, pool));
  }
  // Each token's experts summed in the order they were selected (llama.cpp's order), then
  // the shared expert's part added.
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

}  // namespace pagoda

#include "plan/speed_model.h"

#include <algorithm>
#include <vector>

#include "kernels/matmul/packed_weights.h"
#include "model/model.h"

namespace pagoda {

namespace {

struct Matrix {
  const WeightView* w;
  bool output;  // the output head: one row of logits per sequence, also in prefill
};

double matrix_bytes(const WeightView& w) {
  return packed_kernels(w.type) != nullptr ? static_cast<double>(packed_bytes(w.type, w.rows, w.cols))
                                           : static_cast<double>(w.row_stride) * static_cast<double>(w.rows);
}

// Seconds of one matmul of n tokens: the slower of streaming its bytes and doing its FLOPs.
double matmul_s(const WeightView& w, int64_t n, const HardwareProfile& hw, double* memory_s = nullptr) {
  const FormatRate& r = hw.rate(w.type);
  const double mem = matrix_bytes(w) / r.gemv_bytes_per_s;
  const double flops = 2.0 * static_cast<double>(w.rows) * static_cast<double>(w.cols) * static_cast<double>(n);
  const double compute = flops / r.gemm_flops;
  if (memory_s != nullptr && mem >= compute) *memory_s += mem;
  return std::max(mem, compute);
}

}  // namespace

SpeedPlan plan_speed(const Model& model, const HardwareProfile& hw, const SpeedRequest& r) {
  const ModelConfig& c = model.config();
  const ModelWeights& w = model.weights();
  std::vector<Matrix> ms;
  for (const LayerWeights& L : w.layers)
    for (const WeightView* v : {&L.wq, &L.wk, &L.wv, &L.wo, &L.gate, &L.up, &L.down})
      if (!v->empty()) ms.push_back({v, false});
  ms.push_back({&w.output, true});

  // The rate KV and attention run at: that of the format holding most of the bytes.
  DType bulk_type = ms.front().w->type;
  {
    double best = 0;
    for (const Matrix& m : ms) {
      double sum = 0;
      for (const Matrix& o : ms)
        if (o.w->type == m.w->type) sum += matrix_bytes(*o.w);
      if (sum > best) best = sum, bulk_type = m.w->type;
    }
  }
  const FormatRate& bulk = hw.rate(bulk_type);
  auto attention_s = [&](double queries, double keys_each) {
    // Scores and the weighted sum: 4 * head_dim FLOPs per query head and key, every
    // layer; the keys' K and V bytes read once per step.
    double s = 0;
    for (int32_t l = 0; l < c.n_layer; ++l) {
      const bool local = c.sliding_window > 0 && l < static_cast<int32_t>(c.layer_is_local.size()) && c.layer_is_local[l];
      const double keys = local ? std::min<double>(keys_each, c.sliding_window) : keys_each;
      const double flops = 4.0 * c.head_dim * c.n_head * queries * keys;
      const double bytes = keys * r.kv_bytes_per_token_layer;
      s += std::max(flops / bulk.gemm_flops, bytes / bulk.gemv_bytes_per_s);
    }
    return s;
  };

  SpeedPlan p;
  const int64_t B = std::max(1, r.batch);
  double memory_s = 0, matrix_s = 0;
  for (const Matrix& m : ms) {
    p.weight_bytes_per_step += matrix_bytes(*m.w);
    matrix_s += matmul_s(*m.w, B, hw, &memory_s);
  }
  // Each sequence reads its own context's KV; the mean over the generated tokens is the
  // step at their middle (attention grows linearly).
  p.decode_step_s = matrix_s + B * attention_s(1, r.depth + 0.5 * std::max(1, r.gen));
  p.decode_tok_s = B / p.decode_step_s;
  p.decode_bound_by_memory = matrix_s > 0 ? memory_s / matrix_s : 0;

  const int64_t P = std::max(1, r.prompt);
  // Steps of at most 512 tokens (the engine's chunk); each reads every matrix.
  double prefill = 0;
  for (int64_t done = 0; done < P; done += 512) {
    const int64_t n = std::min<int64_t>(512, P - done);
    for (const Matrix& m : ms) prefill += matmul_s(*m.w, m.output ? 1 : n, hw);
    // Causal: the chunk's queries see on average depth + done + n / 2 keys.
    prefill += attention_s(static_cast<double>(n),
                           static_cast<double>(r.depth + done) + 0.5 * static_cast<double>(n));
  }
  p.prefill_s = prefill;
  p.prefill_tok_s = static_cast<double>(P) / prefill;
  p.ttft_s = prefill;  // the first token is sampled from the prefill's last logits row
  return p;
}

}  // namespace pagoda

#include "plan/speed_model.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/matmul/packed_weights.h"
#include "gguf/gguf_file.h"
#include "model/model.h"
#include "plan/model_probe.h"

namespace pagoda {

namespace {

// A call of a step: the views it multiplies (the decoder's grouping).
struct Call {
  std::vector<const WeightView*> ws;
  bool output;  // the output head: one row of logits per sequence, also in prefill
  // An MoE layer's experts (one expert's matrices stand for all `experts`): a step of n
  // tokens routes n * used rows to them and reads the experts it touches, on average
  // experts * (1 - (1 - used / experts)^n) of them with an even router.
  int32_t experts = 0;
  int32_t used = 0;
  double touched(int64_t n) const {
    if (experts == 0) return 1.0;
    const double miss = 1.0 - static_cast<double>(used) / experts;
    return experts * (1.0 - std::pow(miss, static_cast<double>(n)));
  }
  // Rows of the step's n tokens each touched expert multiplies on average.
  double rows(int64_t n) const {
    return experts == 0 ? static_cast<double>(n) : static_cast<double>(n) * used / touched(n);
  }
  MatmulCall shape() const {
    MatmulCall c;
    for (const WeightView* w : ws) c.push_back({w->type, w->rows, w->cols});
    return c;
  }
};

// As Model::attention_block and Model::ffn_block call matmul and matmul_shared_input.
std::vector<Call> calls_of(const Model& model) {
  const ModelWeights& w = model.weights();
  std::vector<Call> cs;
  const ModelConfig& c = model.config();
  for (const LayerWeights& L : w.layers) {
    cs.push_back({{&L.wq, &L.wk, &L.wv}, false});
    cs.push_back({{&L.wo}, false});
    if (c.is_moe()) {
      // As Model::moe_block: the router, the experts' gate/up then down, the shared expert.
      cs.push_back({{&L.router}, false});
      cs.push_back({{&L.gate_exps[0], &L.up_exps[0]}, false, c.n_expert, c.n_expert_used});
      cs.push_back({{&L.down_exps[0]}, false, c.n_expert, c.n_expert_used});
      if (!L.gate_shexp.empty()) {
        cs.push_back({{&L.gate_shexp, &L.up_shexp}, false});
        cs.push_back({{&L.down_shexp}, false});
      }
      continue;
    }
    if (!L.gate.empty())
      cs.push_back({{&L.gate, &L.up}, false});
    else
      cs.push_back({{&L.up}, false});
    cs.push_back({{&L.down}, false});
  }
  cs.push_back({{&w.output}, true});
  return cs;
}

double matrix_bytes(const WeightView& w) {
  return packed_kernels(w.type) != nullptr ? static_cast<double>(packed_bytes(w.type, w.rows, w.cols))
                                           : static_cast<double>(w.row_stride) * static_cast<double>(w.rows);
}

// Seconds of one call of n tokens: the slower of streaming its matrices and doing their
// FLOPs, as timed for the call where the profile has it, else at their formats' rates.
// An MoE call is one expert's time per touched expert, over its share of the rows.
double call_s(const Call& c, int64_t n, const HardwareProfile& hw, double* memory_s = nullptr) {
  double mem = 0, compute = 0;
  const double rows = c.rows(n);
  if (const CallTiming* t = hw.timing(c.shape())) {
    mem = t->gemv_s;
    compute = t->gemm_s_per_token * rows;
  } else {
    for (const WeightView* w : c.ws) {
      const FormatRate& r = hw.rate(w->type);
      mem += matrix_bytes(*w) / r.gemv_bytes_per_s;
      compute += 2.0 * static_cast<double>(w->rows) * static_cast<double>(w->cols) * rows / r.gemm_flops;
    }
  }
  const double touched = c.touched(n);
  mem *= touched;
  compute *= touched;
  if (memory_s != nullptr && mem >= compute) *memory_s += mem;
  return std::max(mem, compute);
}

}  // namespace

std::vector<MatmulCall> matmul_calls(const Model& model) {
  std::vector<MatmulCall> out;
  for (const Call& c : calls_of(model)) {
    MatmulCall s = c.shape();
    if (std::find(out.begin(), out.end(), s) == out.end()) out.push_back(std::move(s));
  }
  return out;
}

Result<std::optional<HardwareProfile>> hardware_for_model(const std::string& choice, const Model& model,
                                                          ThreadPool& pool, bool remeasure, const GgufFile* file) {
  if (choice == "none") return std::optional<HardwareProfile>();
  if (choice != "auto") {
    const HardwareProfile* p = named_profile(choice);
    if (p == nullptr) {
      std::string names;
      for (const std::string& n : named_profiles()) names += " " + n;
      return error("--hardware: unknown profile '{}' (auto, none or one of:{})", choice, names);
    }
    return std::optional<HardwareProfile>(*p);
  }
  const ModelConfig& c = model.config();
  HardwareRequest want;
  want.calls = matmul_calls(model);
  for (const MatmulCall& call : want.calls)
    for (const MatrixShape& m : call) want.types.push_back(m.type);
  for (KvType kv : {KvType::kF16, KvType::kI8}) want.attention.push_back({c.n_head, c.n_head_kv, c.head_dim, kv});
  want.stream = true;
  if (file != nullptr && c.causal && c.has_lm_head && !c.is_moe()) {
    want.model_file = file;
    for (const Call& m : calls_of(model))
      if (m.output) want.output_call = m.shape();
  }
  auto h = auto_hardware(want, pool, remeasure);
  if (!h) return h.status();
  const std::string key = file != nullptr ? model_shape_key(*file) : std::string();
  std::erase_if(h->models, [&](const ModelTiming& t) { return t.key != key; });
  // The cache holds other models' timings too: show and use this one's.
  std::erase_if(h->calls, [&](const CallTiming& t) {
    return std::find(want.calls.begin(), want.calls.end(), t.call) == want.calls.end();
  });
  std::erase_if(h->attention, [&](const AttentionTiming& t) {
    return std::find(want.attention.begin(), want.attention.end(), t.shape) == want.attention.end();
  });
  return std::optional<HardwareProfile>(std::move(*h));
}

SpeedPlan plan_speed(const Model& model, const HardwareProfile& hw, const SpeedRequest& r) {
  const ModelConfig& c = model.config();
  const ModelWeights& w = model.weights();
  const std::vector<Call> cs = calls_of(model);

  // The rate KV and attention run at without a timing of them: that of the format holding
  // most of the bytes.
  DType bulk_type = w.output.type;
  {
    double best = 0;
    for (const Call& m : cs)
      for (const WeightView* v : m.ws) {
        double sum = 0;
        for (const Call& o : cs)
          for (const WeightView* u : o.ws)
            if (u->type == v->type) sum += matrix_bytes(*u) * std::max(1, o.experts);
        if (sum > best) best = sum, bulk_type = v->type;
      }
  }
  const FormatRate& bulk = hw.rate(bulk_type);
  const AttentionTiming* at = hw.timing(AttentionShape{c.n_head, c.n_head_kv, c.head_dim, r.kv_type});
  auto attention_s = [&](double queries, double keys_each) {
    // Scores and the weighted sum: 4 * head_dim FLOPs per query head and key, every
    // layer; the keys' K and V bytes read once per step.
    double s = 0;
    for (int32_t l = 0; l < c.n_layer; ++l) {
      const bool local = c.sliding_window > 0 && l < static_cast<int32_t>(c.layer_is_local.size()) && c.layer_is_local[l];
      const double keys = local ? std::min<double>(keys_each, c.sliding_window) : keys_each;
      if (at != nullptr) {
        s += queries <= 1 ? keys * at->decode_s_per_key : queries * keys * at->prefill_s_per_query_key;
        continue;
      }
      const double flops = 4.0 * c.head_dim * c.n_head * queries * keys;
      const double bytes = keys * r.kv_bytes_per_token_layer;
      s += std::max(flops / bulk.gemm_flops, bytes / bulk.gemv_bytes_per_s);
    }
    return s;
  };

  SpeedPlan p;
  const int64_t B = std::max(1, r.batch);
  double memory_s = 0, matrix_s = 0;
  for (const Call& m : cs) {
    for (const WeightView* v : m.ws) p.weight_bytes_per_step += matrix_bytes(*v) * m.touched(B);
    matrix_s += call_s(m, B, hw, &memory_s);
  }
  // Each sequence reads its own context's KV; the mean over the generated tokens is the
  // step at their middle (attention grows linearly).
  const double mean_keys = r.depth + 0.5 * std::max(1, r.gen);
  p.decode_step_s = matrix_s + B * attention_s(1, mean_keys);
  p.decode_matrix_s = matrix_s;
  p.bulk_type = bulk_type;
  p.decode_bound_by_memory = matrix_s > 0 ? memory_s / matrix_s : 0;
  // The model's own step, timed on a copy of its shape: its layers' part scaled to the
  // model's layers (all of them when the copy had them all), and attention past the
  // context the copy decoded at.
  const ModelTiming* mt = r.model_key.empty() || c.is_moe() ? nullptr : hw.model_timing(r.model_key);
  const double layer_scale = mt != nullptr ? static_cast<double>(mt->n_layer) / mt->layers : 1.0;
  // Attention over a long context inside the step, against attention timed alone: the
  // ratio of what the copy's deep steps added to what the attention timing predicts for
  // the same keys (1 when the copy ran no deep step).
  auto in_step = [&](double measured, double predicted) {
    return measured > 0 && predicted > 0 ? std::clamp(measured / predicted, 0.5, 3.0) : 1.0;
  };
  double decode_attention_scale = 1.0, prefill_attention_scale = 1.0;
  if (mt != nullptr && mt->deep_keys > mt->decode_keys) {
    decode_attention_scale = in_step((mt->deep_decode_s - mt->decode_s) * layer_scale,
                                     attention_s(1, mt->deep_keys) - attention_s(1, mt->decode_keys));
    const double n = mt->prefill_tokens;
    prefill_attention_scale = in_step((mt->deep_prefill_s - mt->prefill_s) * layer_scale,
                                      attention_s(n, mt->deep_prefill_keys + 0.5 * n) - attention_s(n, 0.5 * n));
  }
  if (mt != nullptr && B == 1) {
    const double step = mt->output_s + (mt->decode_s - mt->output_s) * layer_scale;
    p.decode_step_s =
        step + decode_attention_scale * std::max(0.0, attention_s(1, mean_keys) - attention_s(1, mt->decode_keys));
    p.decode_matrix_s = step;
  }
  p.decode_tok_s = B / p.decode_step_s;

  const int64_t P = std::max(1, r.prompt);
  // Steps of at most 512 tokens (the engine's chunk); each reads every matrix.
  double prefill = 0;
  for (int64_t done = 0; done < P; done += 512) {
    const int64_t n = std::min<int64_t>(512, P - done);
    // Causal: the chunk's queries see on average depth + done + n / 2 keys.
    const double attention = attention_s(static_cast<double>(n),
                                         static_cast<double>(r.depth + done) + 0.5 * static_cast<double>(n));
    if (mt != nullptr) {
      // The copy's chunk from an empty cache, per token, and the attention it did not do.
      const double per_token = (mt->prefill_s - mt->output_s) * layer_scale / mt->prefill_tokens;
      prefill += mt->output_s + per_token * static_cast<double>(n) +
                 prefill_attention_scale * (attention - attention_s(static_cast<double>(n), 0.5 * static_cast<double>(n)));
      continue;
    }
    for (const Call& m : cs) prefill += call_s(m, m.output ? 1 : n, hw);
    prefill += attention;
  }
  p.prefill_s = prefill;
  p.prefill_tok_s = static_cast<double>(P) / prefill;
  p.ttft_s = prefill;  // the first token is sampled from the prefill's last logits row
  return p;
}

}  // namespace pagoda

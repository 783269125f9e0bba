// Loading: config, architecture hooks, weight binding.
#include <fmt/format.h>

#include <cstdlib>
#include <string_view>
#include <tuple>

#include "base/log.h"
#include "gguf/gguf_file.h"
#include "model/arch_spec.h"
#include "model/model.h"
#include "model/weight_packing.h"

namespace pagoda {

namespace {

// An MoE layer's router, experts and shared expert (ModelConfig::is_moe).
Status bind_experts(WeightBinder& b, const ModelConfig& c, const std::string& p, LayerWeights& L) {
  auto router = b.matrix(p + "ffn_gate_inp.weight", c.n_expert, c.n_embd, true);
  if (!router) return router.status();
  L.router = *router;
  for (auto [dst, name, rows, cols] :
       {std::tuple{&L.gate_exps, "ffn_gate_exps", c.n_ff_exp, c.n_embd}, std::tuple{&L.up_exps, "ffn_up_exps", c.n_ff_exp, c.n_embd},
        std::tuple{&L.down_exps, "ffn_down_exps", c.n_embd, c.n_ff_exp}}) {
    auto e = b.experts(p + name + ".weight", c.n_expert, rows, cols);
    if (!e) return e.status();
    *dst = std::move(e.value());
  }
  if (c.n_ff_shexp > 0) {
    for (auto [dst, name, rows, cols] : {std::tuple{&L.gate_shexp, "ffn_gate_shexp", c.n_ff_shexp, c.n_embd},
                                         std::tuple{&L.up_shexp, "ffn_up_shexp", c.n_ff_shexp, c.n_embd},
                                         std::tuple{&L.down_shexp, "ffn_down_shexp", c.n_embd, c.n_ff_shexp}}) {
      auto m = b.matrix(p + name + ".weight", rows, cols, true);
      if (!m) return m.status();
      *dst = *m;
    }
    auto g = b.vector(p + "ffn_gate_inp_shexp.weight", c.n_embd, true);
    if (!g) return g.status();
    L.shexp_gate = *g;
  }
  return Status::ok();
}

// A cross-encoder's classification head, when the file has one (any architecture may
// carry it; rank pooling needs it, which Model::load checks).
Status bind_classifier(const GgufFile& f, WeightBinder& b, const ModelConfig& c, ModelWeights& w) {
  const GgufTensor* out = f.find_tensor("cls.output.weight");
  if (out == nullptr) {
    if (b.has("cls.weight"))
      return error("{}: cls.weight without cls.output.weight (a pooler with no classifier after it)", f.path());
    return Status::ok();
  }
  if (out->shape.size() != 2 || out->shape[1] < 1 || out->shape[1] > c.n_embd)
    return error("{}: cls.output.weight must be 2-D with 1 to {} outputs of {} values", f.path(), c.n_embd, c.n_embd);
  const int64_t n_out = out->shape[1];
  auto cls_out = b.matrix("cls.output.weight", n_out, c.n_embd, true);
  if (!cls_out) return cls_out.status();
  w.cls_out = *cls_out;
  auto cls_out_b = b.vector("cls.output.bias", n_out, false);
  if (!cls_out_b) return cls_out_b.status();
  w.cls_out_b = *cls_out_b;
  auto cls = b.matrix("cls.weight", c.n_embd, c.n_embd, false);
  if (!cls) return cls.status();
  w.cls = *cls;
  auto cls_b = b.vector("cls.bias", c.n_embd, false);
  if (!cls_b) return cls_b.status();
  w.cls_b = *cls_b;
  // llama.cpp sizes the head from the labels when the file lists them.
  const std::string labels_key = c.arch_name + ".classifier.output_labels";
  const GgufArray* labels = f.get_array(labels_key);
  if (labels != nullptr && static_cast<int64_t>(labels->values.size()) != n_out)
    return error("{}: {} lists {} labels but cls.output.weight has {} outputs", f.path(), labels_key,
                 labels->values.size(), n_out);
  return Status::ok();
}

Status bind_weights(const GgufFile& f, const ModelConfig& c, ModelWeights& w) {
  WeightBinder b(f, w);
  const LayerTensorSet set = c.arch->tensors;
#define PAGODA_BIND(dst, expr)   \
  {                              \
    auto r = (expr);             \
    if (!r) return r.status();   \
    dst = *r;                    \
  }
  PAGODA_BIND(w.tok_embd, b.matrix("token_embd.weight", c.n_vocab, c.n_embd, true));
  if (c.arch->lm_head) {
    PAGODA_BIND(w.output_norm, b.vector("output_norm.weight", c.n_embd, true));
    if (set.norm_bias) PAGODA_BIND(w.output_norm_b, b.vector("output_norm.bias", c.n_embd, true));
    PAGODA_BIND(w.output, b.matrix("output.weight", c.n_vocab, c.n_embd, false));
    if (w.output.empty()) w.output = w.tok_embd;
  }
  if (set.learned_positions) {
    PAGODA_BIND(w.pos_embd, b.matrix("position_embd.weight", c.n_ctx_train, c.n_embd, true));
    const GgufTensor* types = f.find_tensor("token_types.weight");
    if (types == nullptr || types->shape.size() != 2 || types->shape[1] < 1 || types->shape[1] > 16)
      return error("{}: missing 2-D tensor token_types.weight (1 to 16 token types of {} values)", f.path(), c.n_embd);
    WeightView type_rows;
    PAGODA_BIND(type_rows, b.matrix("token_types.weight", types->shape[1], c.n_embd, true));
    auto rows = std::make_unique<float[]>(static_cast<size_t>(type_rows.rows * c.n_embd));
    for (int64_t r = 0; r < type_rows.rows; ++r) dequantize_weight_row(type_rows, r, rows.get() + r * c.n_embd);
    w.type_embd = rows.get();
    w.owned.push_back(std::move(rows));
    PAGODA_BIND(w.embd_norm, b.vector("token_embd_norm.weight", c.n_embd, true));
    PAGODA_BIND(w.embd_norm_b, b.vector("token_embd_norm.bias", c.n_embd, true));
  }
  PAGODA_TRY(bind_classifier(f, b, c, w));
  // Llama 3.1 and later divide the RoPE frequencies by these (global layers only).
  PAGODA_BIND(w.rope_freqs, b.vector("rope_freqs.weight", c.rope.rot_dims / 2, false));
  if (set.longrope) {
    PAGODA_BIND(w.rope_long, b.vector("rope_factors_long.weight", c.rope.rot_dims / 2, false));
    PAGODA_BIND(w.rope_short, b.vector("rope_factors_short.weight", c.rope.rot_dims / 2, false));
    if ((w.rope_long == nullptr) != (w.rope_short == nullptr))
      return error("{}: missing tensor {} (LongRoPE needs both the long and the short factors)", f.path(),
                   w.rope_long == nullptr ? "rope_factors_long.weight" : "rope_factors_short.weight");
  }
  w.layers.resize(c.n_layer);
  for (int32_t l = 0; l < c.n_layer; ++l) {
    LayerWeights& L = w.layers[l];
    const std::string p = fmt::format("blk.{}.", l);
    if (!set.no_pre_norms) {
      PAGODA_BIND(L.attn_norm, b.vector(p + "attn_norm.weight", c.n_embd, true));
      PAGODA_BIND(L.ffn_norm, b.vector(p + "ffn_norm.weight", c.n_embd, true));
      if (set.norm_bias) {
        PAGODA_BIND(L.attn_norm_b, b.vector(p + "attn_norm.bias", c.n_embd, true));
        PAGODA_BIND(L.ffn_norm_b, b.vector(p + "ffn_norm.bias", c.n_embd, true));
      }
    }
    // Q, K and V as one matrix (attn_qkv: Q's rows, then K's, then V's) or three.
    WeightView qkv;
    PAGODA_BIND(qkv, b.matrix(p + "attn_qkv.weight", c.q_dim() + 2 * c.kv_dim(), c.n_embd, false));
    if (!qkv.empty()) {
      L.wq = weight_rows(qkv, 0, c.q_dim());
      L.wk = weight_rows(qkv, c.q_dim(), c.kv_dim());
      L.wv = weight_rows(qkv, c.q_dim() + c.kv_dim(), c.kv_dim());
      const float* qkv_bias = nullptr;
      PAGODA_BIND(qkv_bias, b.vector(p + "attn_qkv.bias", c.q_dim() + 2 * c.kv_dim(), false));
      if (qkv_bias != nullptr) {
        L.bq = qkv_bias;
        L.bk = qkv_bias + c.q_dim();
        L.bv = qkv_bias + c.q_dim() + c.kv_dim();
      }
    } else {
      PAGODA_BIND(L.wq, b.matrix(p + "attn_q.weight", c.q_dim(), c.n_embd, true));
      PAGODA_BIND(L.wk, b.matrix(p + "attn_k.weight", c.kv_dim(), c.n_embd, true));
      PAGODA_BIND(L.wv, b.matrix(p + "attn_v.weight", c.kv_dim(), c.n_embd, true));
    }
    PAGODA_BIND(L.wo, b.matrix(p + "attn_output.weight", c.n_embd, c.q_dim(), true));
    PAGODA_BIND(L.bo, b.vector(p + "attn_output.bias", c.n_embd, set.linear_bias));
    // Biases are optional in every family (some Llama variants carry them too), separate
    // ones also beside a fused QKV matrix, as llama.cpp takes them.
    if (L.bq == nullptr) {
      PAGODA_BIND(L.bq, b.vector(p + "attn_q.bias", c.q_dim(), set.qkv_bias));
      PAGODA_BIND(L.bk, b.vector(p + "attn_k.bias", c.kv_dim(), set.qkv_bias));
      PAGODA_BIND(L.bv, b.vector(p + "attn_v.bias", c.kv_dim(), set.qkv_bias));
    }
    if (set.qk_norm || set.qk_norm_full) {
      PAGODA_BIND(L.q_norm, b.vector(p + "attn_q_norm.weight", set.qk_norm_full ? c.q_dim() : c.head_dim, true));
      PAGODA_BIND(L.k_norm, b.vector(p + "attn_k_norm.weight", set.qk_norm_full ? c.kv_dim() : c.head_dim, true));
    }
    if (set.post_norms) {
      PAGODA_BIND(L.post_attn_norm, b.vector(p + "post_attention_norm.weight", c.n_embd, true));
      PAGODA_BIND(L.post_ffw_norm, b.vector(p + "post_ffw_norm.weight", c.n_embd, true));
    }
    if (set.residual_norms) {
      PAGODA_BIND(L.attn_out_norm, b.vector(p + "attn_output_norm.weight", c.n_embd, true));
      PAGODA_BIND(L.attn_out_norm_b, b.vector(p + "attn_output_norm.bias", c.n_embd, true));
      PAGODA_BIND(L.layer_out_norm, b.vector(p + "layer_output_norm.weight", c.n_embd, true));
      PAGODA_BIND(L.layer_out_norm_b, b.vector(p + "layer_output_norm.bias", c.n_embd, true));
    }
    if (c.is_moe()) {
      PAGODA_TRY(bind_experts(b, c, p, L));
      continue;
    }
    if (set.fused_gate_up) {
      WeightView gate_up;
      PAGODA_BIND(gate_up, b.matrix(p + "ffn_up.weight", 2 * static_cast<int64_t>(c.n_ff), c.n_embd, true));
      L.gate = weight_rows(gate_up, 0, c.n_ff);
      L.up = weight_rows(gate_up, c.n_ff, c.n_ff);
    } else {
      if (!set.ungated_ffn) {
        PAGODA_BIND(L.gate, b.matrix(p + "ffn_gate.weight", c.n_ff, c.n_embd, true));
        PAGODA_BIND(L.b_gate, b.vector(p + "ffn_gate.bias", c.n_ff, false));
      }
      PAGODA_BIND(L.up, b.matrix(p + "ffn_up.weight", c.n_ff, c.n_embd, true));
      PAGODA_BIND(L.b_up, b.vector(p + "ffn_up.bias", c.n_ff, set.linear_bias));
    }
    PAGODA_BIND(L.down, b.matrix(p + "ffn_down.weight", c.n_embd, c.n_ff, true));
    PAGODA_BIND(L.b_down, b.vector(p + "ffn_down.bias", c.n_embd, set.linear_bias));
  }
#undef PAGODA_BIND
  return Status::ok();
}

}  // namespace

void Model::set_context_length(int32_t n_ctx) {
  if (weights_.rope_long == nullptr) return;
  // llama.cpp's get_rope_factors: the long factors for a context longer than the one the
  // model was first trained for.
  config_.rope.freq_factors = n_ctx > config_.rope_orig_ctx ? weights_.rope_long : weights_.rope_short;
}

Result<std::unique_ptr<Model>> Model::load(const GgufFile& file, ThreadPool& pool, bool repack,
                                           ParallelRank where) {
  auto cfg = read_config(file);
  if (!cfg) return cfg.status();
  ModelConfig c = std::move(cfg.value());
  const GgufTensor* emb = file.find_tensor("token_embd.weight");
  if (emb == nullptr || emb->shape.size() != 2) return error("{}: missing 2-D tensor token_embd.weight", file.path());
  if (emb->shape[1] <= 0 || emb->shape[1] > (1 << 24))
    return error("{}: token_embd.weight vocabulary size {} is out of range", file.path(), emb->shape[1]);
  c.n_vocab = static_cast<int32_t>(emb->shape[1]);
  c.has_lm_head = c.arch->lm_head;
  PAGODA_TRY(c.arch->configure(file, c));
  if (c.arch->tensors.ungated_ffn && c.act != FfnActivation::kGeluTanh)
    return error("{}: {}'s FFN has no gate, which only a GELU activation supports", file.path(), c.arch_name);
  std::unique_ptr<Model> m(new Model());
  m->config_ = std::move(c);
  m->pool_ = &pool;
  PAGODA_TRY(bind_weights(file, m->config_, m->weights_));
  {
    ModelConfig& mc = m->config_;
    const ModelWeights& w = m->weights_;
    if (w.type_embd != nullptr)
      mc.n_token_types = static_cast<int32_t>(file.find_tensor("token_types.weight")->shape[1]);
    mc.n_cls_out = w.cls_out.empty() ? 0 : static_cast<int32_t>(w.cls_out.rows);
    if (mc.pooling == Pooling::kRank && mc.n_cls_out == 0)
      return error("{}: {}pooling_type is 4 (rank) but the file has no classification head (cls.output.weight)",
                   file.path(), mc.arch_name + ".");
    if (mc.pooling == Pooling::kRank && mc.causal)
      return error("{}: rank pooling reads the first token's state, which only an encoder (attention.causal "
                   "false) has seen the whole input in",
                   file.path());
  }
  {
    auto split = plan_split(m->config_, where.tp, where.pp, where.rank, where.sp);
    if (!split) return split.status();
    m->split_ = std::move(split.value());
    split_weights(m->split_, m->config_, m->weights_);
  }
  m->config_.rope.freq_factors = m->weights_.rope_freqs;
  m->reset_moe_stats();
  if (const char* env = std::getenv("PAGODA_MOE_STATS"); env != nullptr && std::string_view(env) == "0")
    m->moe_stats_on_ = false;
  // llama.cpp's context is the trained one unless asked otherwise; the engine re-chooses
  // for its own (Engine::create).
  m->set_context_length(m->config_.n_ctx_train);
  if (repack) {
    const PackingReport packed = m->packing_ = pack_model_weights(file, m->weights_, pool, m->split_.tensor_parallel());
    if (packed.matrices > 0)
      log_info("repacked {} matrices into 16-row panels ({:.1f} MiB)", packed.matrices,
               static_cast<double>(packed.bytes) / (1 << 20));
  }
  // What the load read of the file (metadata, the rows of the matrices now packed) leaves
  // the resident set; matrices still read from the file fault back in on first use.
  if (repack) file.drop_all_pages();
  const ModelWeights& w = m->weights_;
  // An encoder reads its table for every token of every input (an embedding server's
  // whole work): the rows stay.
  m->release_embedding_rows_ = m->config_.has_lm_head && file.maps(w.tok_embd.data) &&
                               (w.output.data != w.tok_embd.data || w.output.packed != nullptr);
  for (const auto& t : file.tensors()) m->weight_bytes_ += t.nbytes;
  return m;
}

}  // namespace pagoda

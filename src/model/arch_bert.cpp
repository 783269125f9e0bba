// BERT encoders (sentence-transformers models such as all-MiniLM-L6-v2, BGE, E5) and
// cross-encoders (rerankers), as llama.cpp's bert graph runs them: the embedding is token +
// learned position + token type, LayerNormed; each layer is post-LN (attention on the
// residual stream, add, LayerNorm; an ungated GELU MLP, add, LayerNorm) with biases
// everywhere; attention is bidirectional (bert.attention.causal false), scaled by
// 1/sqrt(head_dim), no RoPE. No output head: the model embeds (pooled as
// bert.pooling_type says) or, with a classification head, scores a text pair (rank
// pooling); it does not generate. The token type is 1 over a pair's second text, as
// Hugging Face's token_type_ids (llama.cpp adds type 0's row to every token). GELU is ggml's
// (tanh form through its FP16 table), as llama.cpp evaluates it; Hugging Face's BERT uses
// the erf form, which differs by under 5e-4 per activation.
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "model/arch_spec.h"
#include "model/random_model.h"

namespace pagoda {
namespace {

constexpr const char* kEpsKey = "bert.attention.layer_norm_epsilon";

Status configure(const GgufFile& f, ModelConfig& c) {
  c.norm = NormKind::kLayer;
  c.act = FfnActivation::kGeluTanh;
  auto eps = required_positive(f, kEpsKey);
  if (!eps) return eps.status();
  c.norm_eps = *eps;
  c.layer_skips_rope.assign(static_cast<size_t>(c.n_layer), true);
  c.rope_local = c.rope;
  c.sliding_window = 0;
  c.has_lm_head = false;
  if (c.causal) return error("{}: bert.attention.causal is true; BERT encoders attend both ways", f.path());
  return Status::ok();
}

void write_random_metadata(const RandomModelSpec& s, GgufWriter& w) {
  w.set_f32(kEpsKey, 1e-12f);
  w.set_bool("bert.attention.causal", false);
  // Mean, as sentence-transformers models pool; rank with a classification head.
  w.set_u32("bert.pooling_type", s.classifier_outputs > 0 ? 4 : 1);
  w.set_u32("tokenizer.ggml.token_type_count", 2);
}

// Q/K/V and the MLP read the residual stream itself (its LayerNorm also feeds the next
// residual add, so no scale folds into it), and the down projection reads GELU(up): only
// the attention output's group (into V's rows and bias, which awq_groups adds) remains.
const std::vector<AwqGroupSpec>& bert_awq_groups() {
  static const std::vector<AwqGroupSpec> groups;
  return groups;
}

}  // namespace

extern const ArchSpec kArchBert = {
    .name = "bert",
    .tensors = {.qkv_bias = true,
                .no_pre_norms = true,
                .norm_bias = true,
                .linear_bias = true,
                .ungated_ffn = true,
                .residual_norms = true,
                .learned_positions = true},
    .configure = configure,
    .awq_groups = bert_awq_groups,
    .lm_head = false,
    .write_random_metadata = write_random_metadata,
};

}  // namespace pagoda

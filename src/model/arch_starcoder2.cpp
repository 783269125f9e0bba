// StarCoder2, as llama.cpp's starcoder2 graph runs it: LayerNorms with weight and bias
// (blk.N.attn_norm, ffn_norm and output_norm, each with its .bias; epsilon
// starcoder2.attention.layer_norm_epsilon, required), biases on Q, K, V and the attention
// output and on both FFN matrices, an ungated MLP down(gelu(up(x) + b)) + b with GELU as
// ggml evaluates it, NeoX RoPE over whole heads, grouped KV heads, q.k scaled by
// 1/sqrt(head_dim). Output tied to token_embd unless the file has output.weight. The
// converter's attention.sliding_window is not applied: llama.cpp's graph has none.
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "model/arch_spec.h"
#include "model/random_model.h"

namespace pagoda {
namespace {

constexpr const char* kEpsKey = "starcoder2.attention.layer_norm_epsilon";

Status configure(const GgufFile& f, ModelConfig& c) {
  c.rope.layout = RopeLayout::kNeox;
  c.act = FfnActivation::kGeluTanh;
  c.norm = NormKind::kLayer;
  auto eps = required_positive(f, kEpsKey);
  if (!eps) return eps.status();
  c.norm_eps = *eps;
  c.rope_local = c.rope;
  c.sliding_window = 0;
  return Status::ok();
}

// The converter writes LayerNorm's epsilon under its own key (StarCoder2's is 1e-5).
void write_random_metadata(const RandomModelSpec&, GgufWriter& w) { w.set_f32(kEpsKey, 1e-5f); }

// AWQ folds into the LayerNorms (weight and bias) and, with a KV head per query head, into
// V's rows and bias; the down projection reads GELU(up), which no scale passes through
// (dense_awq_groups folds it into up's rows, which only a gated product allows).
const std::vector<AwqGroupSpec>& starcoder2_awq_groups() {
  static const std::vector<AwqGroupSpec> groups = {
      {LinearInput::kAttention, {"attn_q", "attn_k", "attn_v"}, "attn_norm", false, "q,k,v"},
      {LinearInput::kFfn, {"ffn_up"}, "ffn_norm", false, "up"},
  };
  return groups;
}

}  // namespace

extern const ArchSpec kArchStarcoder2 = {
    .name = "starcoder2",
    .tensors = {.qkv_bias = true, .norm_bias = true, .linear_bias = true, .ungated_ffn = true},
    .configure = configure,
    .awq_groups = starcoder2_awq_groups,
    .tied_output = true,
    .write_random_metadata = write_random_metadata,
};

}  // namespace pagoda

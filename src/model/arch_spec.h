// What one model architecture is, in one place: its GGUF name, the per-layer tensors it
// binds beyond the common ones, how its hyper-parameters differ from the common keys
// (configure), the built-in chat template a file without one falls back to, the groups
// of linear maps AWQ scales together, and what the random-model writer emits for it.
// Each architecture is one file (model/arch_<name>.cpp) defining one ArchSpec, listed
// once in model/arch_registry.cpp. Specs are immutable constants: thread-safe, free.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "model/config.h"
#include "model/linear_input.h"

namespace pagoda {

class GgufFile;
class GgufWriter;
struct RandomModelSpec;

// Optional per-layer tensors; each is bound (required) exactly when its flag is set.
struct LayerTensorSet {
  bool qkv_bias = false;    // blk.N.attn_{q,k,v}.bias (always accepted when present)
  bool qk_norm = false;     // blk.N.attn_{q,k}_norm.weight: per-head RMSNorm of Q and K
  // blk.N.attn_{q,k}_norm.weight over Q's and K's whole rows (q_dim and kv_dim values: one
  // RMSNorm across all heads together, OLMo 2) instead of per head.
  bool qk_norm_full = false;
  bool post_norms = false;  // blk.N.post_attention_norm / post_ffw_norm.weight
  // No blk.N.attn_norm / ffn_norm: attention and the FFN read the residual stream itself
  // (OLMo 2, which normalizes their outputs instead: post_norms).
  bool no_pre_norms = false;
  // blk.N.attn_norm.bias, blk.N.ffn_norm.bias and output_norm.bias: the biases of
  // LayerNorms (StarCoder2; ModelConfig::norm says which norm the weights belong to).
  bool norm_bias = false;
  // blk.N.attn_output.bias, ffn_up.bias and ffn_down.bias (StarCoder2). Like the Q/K/V
  // biases they are accepted in every family when present (and ffn_gate.bias), as
  // llama.cpp's llama graph takes them; the flag requires them.
  bool linear_bias = false;
  // No blk.N.ffn_gate: the FFN is down(gelu(up(x))) (StarCoder2's MLP).
  bool ungated_ffn = false;
  // blk.N.attn_qkv.weight: Q's, K's and V's rows in one matrix (Phi-3). The loader takes
  // it in place of attn_q/k/v for any architecture, as llama.cpp does; the flag makes the
  // random-model writer emit it (and leaves AWQ no V rows to fold the output's scale into).
  bool fused_qkv = false;
  // blk.N.ffn_up.weight holds the gate's rows and then the up rows (2 n_ff rows) and
  // there is no ffn_gate (Phi-3).
  bool fused_gate_up = false;
  // rope_factors_long.weight / rope_factors_short.weight (model-wide, rot_dims / 2 each):
  // LongRoPE's frequency divisors, the long ones for a context beyond
  // rope.scaling.original_context_length (Phi-3). Optional; both or neither.
  bool longrope = false;
  // BERT's post-LN encoder layers: no pre-norms; blk.N.attn_output_norm after the
  // attention's residual add and blk.N.layer_output_norm after the FFN's (LayerNorms with
  // weight and bias) normalize the residual stream itself.
  bool residual_norms = false;
  // BERT's embedding: the token's row plus position_embd.weight's row for its position
  // (learned positions, one row per position up to the context; no RoPE) plus the row of
  // token_types.weight for its token type (0, "sentence A", but over a text pair's second
  // text: BatchSeq::segment_b), through token_embd_norm (LayerNorm).
  bool learned_positions = false;
};

// Mixture-of-experts layers as llama.cpp's graphs run them: a router (blk.N.ffn_gate_inp,
// n_expert x n_embd) whose softmax picks each token's expert_used_count experts, whose
// SwiGLU FFNs (ffn_{gate,up,down}_exps, 3-D: one matrix per expert) are summed with the
// selected probabilities as weights. A layer is MoE exactly when the file has
// {arch}.expert_count > 0.
struct MoeSpec {
  bool supported = false;  // the architecture may have experts (llama: Mixtral)
  bool required = false;   // and always has them (qwen2moe, qwen3moe, olmoe)
  // The selected experts' probabilities are divided by their sum (Mixtral, Qwen3-MoE) or
  // used as the softmax gave them (Qwen2-MoE, OLMoE).
  bool norm_weights = false;
  // The experts' width is {arch}.expert_feed_forward_length (else feed_forward_length /
  // expert_used_count, as llama.cpp falls back), not feed_forward_length (Qwen-MoE).
  bool expert_ff_key = false;
  // A shared expert every token also runs (ffn_{gate,up,down}_shexp, width
  // {arch}.expert_shared_feed_forward_length), its output scaled by
  // sigmoid(ffn_gate_inp_shexp . x) (Qwen2-MoE).
  bool shared_expert = false;
};

// A group of matrices that read one input, so AWQ searches one channel scale for all of
// them and folds its inverse into the tensor producing that input.
struct AwqGroupSpec {
  LinearInput input;
  std::vector<const char*> mats;  // tensor names without "blk.N." and ".weight"
  const char* fold;               // the tensor producing the input
  bool fold_rows;                 // fold into rows of a matrix (true) or into a norm vector
  const char* label;
};

// The groups of a dense pre-norm decoder layer (Q/K/V, gate/up, down). A fold into a norm
// or into a matrix's rows divides the tensor's bias (blk.N.<fold>.bias) too when the file
// has one, so LayerNorms and biased V projections fold like the rest.
const std::vector<AwqGroupSpec>& dense_awq_groups();

// The defaults are a plain dense decoder's, so a spec names only what differs.
struct ArchSpec {
  const char* name = nullptr;  // general.architecture
  LayerTensorSet tensors = {};
  MoeSpec moe = {};
  // Fills what differs from the common keys (RoPE layout, activation, sliding-window
  // pattern, embedding scale); c already holds the common keys.
  Status (*configure)(const GgufFile& f, ModelConfig& c) = nullptr;
  // Name of the built-in chat template (chat/builtin_templates.h) used when the file
  // carries none.
  const char* chat_template = "chatml";
  // AWQ's groups of a layer; awq_groups() adds the attention output's when every query
  // head has its own KV head.
  const std::vector<AwqGroupSpec>& (*awq_groups)() = dense_awq_groups;
  // An encoder with no output head (no output.weight, no output_norm): it embeds, it does
  // not generate.
  bool lm_head = true;
  // The random-model writer: whether output.weight is tied to token_embd, and the
  // architecture's own metadata keys beyond the common ones (nullptr: none).
  bool tied_output = false;
  void (*write_random_metadata)(const RandomModelSpec& s, GgufWriter& w) = nullptr;
  // Control tokens the random vocabulary ends with (the family's turn markers; llama.cpp
  // looks some up by name, e.g. <|endoftext|> in a file named like Phi-3).
  std::span<const char* const> random_control_tokens = {};
};

// The configure step of a plain pre-norm SwiGLU decoder (Llama's, Qwen2's): only the
// RoPE layout differs between them; every layer is global.
void configure_plain_decoder(ModelConfig& c, RopeLayout layout);
template <RopeLayout kLayout>
Status configure_plain(const GgufFile&, ModelConfig& c) {
  configure_plain_decoder(c, kLayout);
  return Status::ok();
}

// A metadata key an architecture requires, as a positive finite number: missing, or
// not one, is a one-line error naming the file and the key.
Result<float> required_positive(const GgufFile& f, const std::string& key);

// nullptr when no registered architecture has this GGUF name.
const ArchSpec* find_arch(std::string_view name);
std::span<const ArchSpec* const> all_archs();
// "llama, qwen2, gemma3": for error messages and --help.
std::string arch_names();
// The architectures whose layers may be experts: "llama, qwen2moe, ...".
std::string moe_arch_names();

// The groups AWQ uses for a model of `arch` with these head counts (no FFN groups for an
// architecture whose layers are always experts).
std::vector<AwqGroupSpec> awq_groups(const ArchSpec& arch, int64_t n_head, int64_t n_head_kv);

}  // namespace pagoda

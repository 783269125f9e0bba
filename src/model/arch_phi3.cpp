// Phi-3 (and Phi-3.5 / Phi-4-mini, which share the architecture), as llama.cpp's phi3
// graph runs it: Llama's pre-norm decoder with NeoX RoPE over the first
// rope.dimension_count dimensions of each head (partial rotary: Phi-4-mini rotates 3/4),
// Q, K and V in one matrix (blk.N.attn_qkv.weight; separate ones load too), the FFN's
// gate and up rows in one matrix (blk.N.ffn_up.weight, gate first, SwiGLU), and
// LongRoPE: rope_factors_long / rope_factors_short.weight divide the pairs' frequencies,
// the long ones when the context exceeds rope.scaling.original_context_length
// (Model::set_context_length), with rope.scaling.attn_factor on cos and sin either way.
// phi3.attention.sliding_window is read but not applied: llama.cpp runs every Phi-3 layer
// with global attention ("Phi SWA is currently disabled"), and parity with it is the
// check. Output tied to token_embd unless the file has output.weight.
#include "model/arch_spec.h"

namespace pagoda {
namespace {

// Phi-3's special tokens, which its chat turns use.
constexpr const char* kControlTokens[] = {"<|endoftext|>", "<|assistant|>", "<|end|>", "<|system|>", "<|user|>"};

const std::vector<AwqGroupSpec>& phi3_awq_groups() {
  // AWQ folds the down projection's scales into the rows producing its input, the up
  // half of ffn_up, which a fold into the whole fused tensor would miss: no down group.
  static const std::vector<AwqGroupSpec> groups = {
      {LinearInput::kAttention, {"attn_qkv"}, "attn_norm", false, "qkv"},
      {LinearInput::kFfn, {"ffn_up"}, "ffn_norm", false, "gate,up"},
  };
  return groups;
}

}  // namespace

extern const ArchSpec kArchPhi3 = {
    .name = "phi3",
    .tensors = {.fused_qkv = true, .fused_gate_up = true, .longrope = true},
    .configure = [](const GgufFile&, ModelConfig& c) {
      configure_plain_decoder(c, RopeLayout::kNeox);
      c.sliding_window = 0;
      return Status::ok();
    },
    .chat_template = "phi3",
    .awq_groups = phi3_awq_groups,
    .random_control_tokens = kControlTokens,
};

}  // namespace pagoda

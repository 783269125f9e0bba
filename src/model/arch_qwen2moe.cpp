// Qwen2-MoE (Qwen1.5-MoE, Qwen2-57B-A14B): Qwen2's attention (biases on Q, K and V, NeoX
// RoPE) and an MoE FFN in every layer: experts of qwen2moe.expert_feed_forward_length,
// the top-k softmax probabilities used as they are (not renormalized), plus a shared
// expert of expert_shared_feed_forward_length that every token runs, scaled by
// sigmoid(ffn_gate_inp_shexp . x), as llama.cpp's qwen2moe graph computes it.
#include "model/arch_spec.h"

namespace pagoda {

extern const ArchSpec kArchQwen2Moe = {
    .name = "qwen2moe",
    .tensors = {.qkv_bias = true},
    .moe = {.supported = true, .required = true, .expert_ff_key = true, .shared_expert = true},
    .configure = configure_plain<RopeLayout::kNeox>,
};

}  // namespace pagoda

// Qwen3-MoE (Qwen3-30B-A3B, 235B-A22B): Qwen3's attention (per-head RMSNorm of Q and K,
// no biases, NeoX RoPE) and an MoE FFN in every layer: experts of
// qwen3moe.expert_feed_forward_length, the top-k probabilities renormalized to sum to 1;
// no shared expert.
#include "model/arch_spec.h"

namespace pagoda {

extern const ArchSpec kArchQwen3Moe = {
    .name = "qwen3moe",
    .tensors = {.qk_norm = true},
    .moe = {.supported = true, .required = true, .norm_weights = true, .expert_ff_key = true},
    .configure = configure_plain<RopeLayout::kNeox>,
};

}  // namespace pagoda

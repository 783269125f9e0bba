// Qwen3 (dense): Qwen2's layout without the Q/K/V biases and with a per-head RMSNorm of
// Q and K (attn_q_norm / attn_k_norm, head_dim wide) before NeoX-style RoPE.
#include "model/arch_spec.h"

namespace pagoda {

extern const ArchSpec kArchQwen3 = {
    .name = "qwen3",
    .tensors = {.qk_norm = true},
    .configure = configure_plain<RopeLayout::kNeox>,
};

}  // namespace pagoda

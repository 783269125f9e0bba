// OLMoE (OLMoE-1B-7B: 64 experts, 8 per token): pre-norm layers with an RMSNorm over Q's
// and K's whole rows (attn_q_norm / attn_k_norm of n_embd values, as OLMo 2's), NeoX RoPE
// and an MoE FFN in every layer: experts of feed_forward_length, the top-k softmax
// probabilities used as they are. llama.cpp sizes attn_k_norm as n_embd, so a file it
// loads has as many KV heads as query heads (OLMoE's own: 16 and 16).
#include "model/arch_spec.h"

namespace pagoda {

extern const ArchSpec kArchOlmoe = {
    .name = "olmoe",
    .tensors = {.qk_norm_full = true},
    .moe = {.supported = true, .required = true},
    .configure = configure_plain<RopeLayout::kNeox>,
};

}  // namespace pagoda

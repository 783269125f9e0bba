// Llama family (Llama 2/3, Mistral, TinyLlama, SmolLM): pre-norm decoder with SwiGLU and
// RoPE on adjacent pairs (GGUF conversion permutes Q/K rows for that layout). Mixtral
// converts as llama with llama.expert_count / expert_used_count: experts of
// feed_forward_length, top-k probabilities renormalized to sum to 1.
#include "model/arch_spec.h"

namespace pagoda {

extern const ArchSpec kArchLlama = {
    .name = "llama",
    .moe = {.supported = true, .norm_weights = true},
    .configure = configure_plain<RopeLayout::kNorm>,
};

}  // namespace pagoda

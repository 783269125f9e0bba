// Llama family (Llama 2/3, Mistral, TinyLlama, SmolLM): pre-norm decoder with SwiGLU and
// RoPE on adjacent pairs (GGUF conversion permutes Q/K rows for that layout).
#include "model/arch_spec.h"

namespace pagoda {

extern const ArchSpec kArchLlama = {
    .name = "llama",
    .configure = configure_plain<RopeLayout::kNorm>,
};

}  // namespace pagoda

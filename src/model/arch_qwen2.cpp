// Qwen2 / Qwen2.5: the Llama layout plus biases on Q, K and V, and NeoX-style RoPE
// (rotating the two halves of each head).
#include "model/arch_spec.h"

namespace pagoda {

extern const ArchSpec kArchQwen2 = {
    .name = "qwen2",
    .tensors = {.qkv_bias = true},
    .configure = configure_plain<RopeLayout::kNeox>,
};

}  // namespace pagoda

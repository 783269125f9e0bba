// Qwen2 / Qwen2.5: the Llama layout plus biases on Q, K and V, and NeoX-style RoPE
// (rotating the two halves of each head).
#include "model/arch_spec.h"

namespace pagoda {
namespace {

Status configure(const GgufFile&, ModelConfig& c) {
  configure_plain_decoder(c, RopeLayout::kNeox);
  return Status::ok();
}

}  // namespace

extern const ArchSpec kArchQwen2 = {
    .name = "qwen2",
    .tensors = {.qkv_bias = true},
    .configure = configure,
    .chat_template = "chatml",
    .awq_groups = dense_awq_groups,
    .tied_output = false,
    .write_random_metadata = nullptr,
};

}  // namespace pagoda

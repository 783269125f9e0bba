// Llama family (Llama 2/3, Mistral, TinyLlama, SmolLM): pre-norm decoder with SwiGLU and
// RoPE on adjacent pairs (GGUF conversion permutes Q/K rows for that layout).
#include "model/arch_spec.h"

namespace pagoda {
namespace {

Status configure(const GgufFile&, ModelConfig& c) {
  configure_plain_decoder(c, RopeLayout::kNorm);
  return Status::ok();
}

}  // namespace

extern const ArchSpec kArchLlama = {
    .name = "llama",
    .tensors = {},
    .configure = configure,
    .chat_template = "chatml",
    .awq_groups = dense_awq_groups,
    .tied_output = false,
    .write_random_metadata = nullptr,
};

}  // namespace pagoda

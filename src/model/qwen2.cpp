// Qwen2 / Qwen2.5: the Llama layout plus biases on Q, K and V, and NeoX-style RoPE
// (rotating the two halves of each head).
#include "gguf/gguf_file.h"
#include "model/architectures.h"

namespace pagoda {

Status configure_qwen2(const GgufFile& f, ModelConfig& c) {
  c.rope.layout = RopeLayout::kNeox;
  c.act = FfnActivation::kSilu;
  c.rope_local = c.rope;
  return Status::ok();
}

}  // namespace pagoda

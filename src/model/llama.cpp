// Llama family (Llama 2/3, Mistral, TinyLlama, SmolLM): pre-norm decoder with SwiGLU and
// RoPE on adjacent pairs (GGUF conversion permutes Q/K rows for that layout).
#include "gguf/gguf_file.h"
#include "model/architectures.h"

namespace pagoda {

Status configure_llama(const GgufFile& f, ModelConfig& c) {
  c.rope.layout = RopeLayout::kNorm;
  c.act = FfnActivation::kSilu;
  c.rope_local = c.rope;
  return Status::ok();
}

}  // namespace pagoda

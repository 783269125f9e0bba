// Gemma 3: embeddings scaled by sqrt(n_embd); per-head RMSNorm of Q and K; norms both
// before and after attention and FFN; GeGLU (tanh GELU); tied output. Five of every six
// layers use sliding-window attention with their own RoPE base (10000), the sixth is
// global and uses rope.freq_base with the file's linear scaling. GGUF conversion already
// added the 1 to Gemma's (1 + w) norm weights, so norms multiply by w as usual.
#include <cmath>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "model/arch_spec.h"
#include "model/random_model.h"

namespace pagoda {
namespace {

constexpr int kSlidingWindowPattern = 6;  // layers i with i % 6 < 5 are local
constexpr float kLocalRopeBase = 10000.0f;
constexpr float kGlobalRopeBase = 1000000.0f;  // what the converter writes for Gemma 3

Status configure(const GgufFile& f, ModelConfig& c) {
  c.rope.layout = RopeLayout::kNeox;
  c.act = FfnActivation::kGeluTanh;
  c.embed_scale = std::sqrt(static_cast<float>(c.n_embd));
  c.attn_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  c.rope_local = c.rope;
  c.rope_local.freq_base = kLocalRopeBase;
  c.rope_local.freq_scale = 1.0f;
  if (c.sliding_window <= 0) return error("{}: gemma3.attention.sliding_window is missing", f.path());
  for (int32_t l = 0; l < c.n_layer; ++l) c.layer_is_local[l] = (l % kSlidingWindowPattern) < kSlidingWindowPattern - 1;
  return Status::ok();
}

void write_random_metadata(const RandomModelSpec& s, GgufWriter& w) {
  w.set_f32("gemma3.rope.freq_base", kGlobalRopeBase);
  w.set_u32("gemma3.attention.sliding_window", s.sliding_window);
}

}  // namespace

extern const ArchSpec kArchGemma3 = {
    .name = "gemma3",
    .tensors = {.qk_norm = true, .post_norms = true},
    .configure = configure,
    .chat_template = "gemma",
    .tied_output = true,
    .write_random_metadata = write_random_metadata,
};

}  // namespace pagoda

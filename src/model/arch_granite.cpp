// IBM Granite (3.x dense): Llama's layout with four multipliers from the file: token
// embeddings times granite.embedding_scale, q.k times granite.attention.scale (instead
// of 1/sqrt(head_dim)), each attention and FFN output times granite.residual_scale
// before it joins the residual, and the logits divided by granite.logit_scale, as
// llama.cpp's granite graph applies them (a missing or zero multiplier is the plain
// decoder's).
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "model/arch_spec.h"

namespace pagoda {
namespace {

Status configure(const GgufFile& f, ModelConfig& c) {
  configure_plain_decoder(c, RopeLayout::kNorm);
  auto multiplier = [&](const char* key, float& out) {
    if (auto v = f.get_float(key); v && *v != 0.0) out = static_cast<float>(*v);
  };
  multiplier("granite.embedding_scale", c.embed_scale);
  multiplier("granite.attention.scale", c.attn_scale);
  multiplier("granite.residual_scale", c.residual_scale);
  multiplier("granite.logit_scale", c.logit_scale);
  return Status::ok();
}

// Multipliers away from 1 (and from 1/sqrt(head_dim)), so a test of a generated model
// fails if any of them is dropped; small enough to keep random activations tame.
void write_random_metadata(const RandomModelSpec&, GgufWriter& w) {
  w.set_f32("granite.embedding_scale", 3.0f);
  w.set_f32("granite.attention.scale", 0.1f);
  w.set_f32("granite.residual_scale", 0.6f);
  w.set_f32("granite.logit_scale", 2.5f);
}

}  // namespace

extern const ArchSpec kArchGranite = {
    .name = "granite",
    .configure = configure,
    .write_random_metadata = write_random_metadata,
};

}  // namespace pagoda

// Gemma 2, as llama.cpp's gemma2 graph runs it: embeddings scaled by sqrt(n_embd); norms
// both before and after attention and FFN (no QK-norm); GeGLU (tanh GELU); NeoX RoPE;
// attention scores soft-capped (cap * tanh(s / cap), gemma2.attn_logit_softcapping)
// before the mask and softmax, and the logits too (gemma2.final_logit_softcapping).
// Layers alternate sliding-window and global attention: layer i is local when
// i % 2 == 0 (llama.cpp's pattern of 2, or gemma2.attention.sliding_window_pattern when
// the file has one), over gemma2.attention.sliding_window positions; both kinds use the
// file's RoPE (rope.freq_base, 10000 when absent), local ones rope.freq_base_swa if set.
// q.k is scaled by 1/sqrt(head_dim), except for the 46-layer 27B model, which llama.cpp
// scales by 1/sqrt(n_embd / n_head) (Gemma's query_pre_attn_scalar); the
// query_pre_attn_scalar key itself is not read, as llama.cpp does not. Output tied to
// token_embd unless the file has output.weight. The converter already added the 1 to
// Gemma's (1 + w) norm weights, so norms multiply by w as usual.
#include <cmath>
#include <string>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "model/arch_spec.h"
#include "model/random_model.h"

namespace pagoda {
namespace {

constexpr int64_t kSlidingWindowPattern = 2;  // layers i with i % 2 < 1 are local
constexpr int32_t kLayers27B = 46;

// A required positive number: missing or not positive is an error naming file and key.
Result<double> positive(const GgufFile& f, const std::string& key) {
  const GgufValue* v = f.find(key);
  if (v == nullptr) return error("{}: gemma2 needs metadata key {}, which is missing", f.path(), key);
  const auto x = f.get_float(key);
  if (!x || !std::isfinite(*x) || *x <= 0.0)
    return error("{}: metadata {} must be a positive number", f.path(), key);
  return *x;
}

Status configure(const GgufFile& f, ModelConfig& c) {
  c.rope.layout = RopeLayout::kNeox;
  c.act = FfnActivation::kGeluTanh;
  c.embed_scale = std::sqrt(static_cast<float>(c.n_embd));
  c.attn_scale = c.n_layer == kLayers27B ? 1.0f / std::sqrt(static_cast<float>(c.n_embd / c.n_head))
                                         : 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  c.rope_local = c.rope;
  if (auto base = f.get_float("gemma2.rope.freq_base_swa")) c.rope_local.freq_base = static_cast<float>(*base);
  const char* window_key = "gemma2.attention.sliding_window";
  if (f.find(window_key) == nullptr) return error("{}: gemma2 needs metadata key {}, which is missing", f.path(), window_key);
  const auto window = f.get_int(window_key);
  if (!window || *window <= 0 || *window > (1 << 30))
    return error("{}: metadata {} must be a positive number of positions", f.path(), window_key);
  c.sliding_window = static_cast<int32_t>(*window);
  auto attn_cap = positive(f, "gemma2.attn_logit_softcapping");
  if (!attn_cap) return attn_cap.status();
  auto final_cap = positive(f, "gemma2.final_logit_softcapping");
  if (!final_cap) return final_cap.status();
  c.attn_softcap = static_cast<float>(*attn_cap);
  c.final_softcap = static_cast<float>(*final_cap);
  int64_t pattern = kSlidingWindowPattern;
  if (f.find("gemma2.attention.sliding_window_pattern") != nullptr) {
    const auto p = f.get_int("gemma2.attention.sliding_window_pattern");
    if (!p || *p < 0 || *p > c.n_layer)
      return error("{}: metadata gemma2.attention.sliding_window_pattern must be a layer count (0..{}); a per-layer "
                   "array is not supported",
                   f.path(), c.n_layer);
    pattern = *p;
  }
  // llama.cpp's set_swa_pattern: a pattern of 0 makes every layer local.
  for (int32_t l = 0; l < c.n_layer; ++l) c.layer_is_local[l] = pattern == 0 || l % pattern < pattern - 1;
  return Status::ok();
}

// Caps below Gemma 2's 50 and 30, so that a random model's scores and logits (a few units
// and ~sqrt(n_embd)) reach the curved part of tanh and a test fails if either is dropped.
void write_random_metadata(const RandomModelSpec& s, GgufWriter& w) {
  w.set_u32("gemma2.attention.sliding_window", s.sliding_window);
  w.set_f32("gemma2.attn_logit_softcapping", 4.0f);
  w.set_f32("gemma2.final_logit_softcapping", 20.0f);
}

}  // namespace

extern const ArchSpec kArchGemma2 = {
    .name = "gemma2",
    .tensors = {.post_norms = true},
    .configure = configure,
    .chat_template = "gemma",
    .tied_output = true,
    .write_random_metadata = write_random_metadata,
};

}  // namespace pagoda

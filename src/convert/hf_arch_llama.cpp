// Llama (LlamaForCausalLM): HF stores Q and K rows in the rotate-half RoPE layout; GGUF
// wants adjacent pairs, so llama.cpp's converter permutes them, and so does this one.
// Llama 3.1's "llama3" RoPE scaling becomes a rope_freqs tensor of per-pair factors.
#include "convert/hf_arch.h"
#include "convert/hf_text_model.h"
#include "gguf/gguf_writer.h"

namespace pagoda {
namespace {

Status write_metadata(const ConvertContext& c, HfVocab&, GgufWriter& w) {
  PAGODA_TRY(write_text_model_keys(c, "llama", w));
  auto vocab = c.config.require_u32({"vocab_size"});
  if (!vocab) return vocab.status();
  w.set_u32("llama.vocab_size", *vocab);
  uint32_t rope_dim = 0;
  if (c.config.has("head_dim")) {
    auto hd = c.config.require_u32({"head_dim"});
    if (!hd) return hd.status();
    rope_dim = *hd;
  } else {
    auto embd = c.config.require_u32({"hidden_size"});
    auto heads = c.config.require_u32({"num_attention_heads"});
    if (!embd) return embd.status();
    if (!heads || *heads == 0) return error("{}: num_attention_heads is missing or zero", c.config.path());
    rope_dim = *embd / *heads;
  }
  w.set_u32("llama.rope.dimension_count", rope_dim);
  return Status::ok();
}

Result<std::optional<TensorMapping>> map_tensor(const ConvertContext& c, const HfVocab&, std::string_view name) {
  return map_decoder_tensor(c, name, DecoderNaming{.permute_qk = true});
}

}  // namespace

extern const HfArch kHfArchLlama = {
    .gguf_name = "llama",
    .hf_classes = {"LlamaForCausalLM"},
    .vocab = HfVocabKind::kByteLevelBpe,
    .write_metadata = write_metadata,
    .map_tensor = map_tensor,
    .extra_tensors = llama3_rope_freqs,
};

}  // namespace pagoda

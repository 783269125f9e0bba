// Llama (LlamaForCausalLM): HF stores Q and K rows in the rotate-half RoPE layout; GGUF
// wants adjacent pairs, so llama.cpp's converter permutes them, and so does this one.
// Llama 3.1's "llama3" RoPE scaling becomes a rope_freqs tensor of per-pair factors.
#include <filesystem>

#include "convert/hf_arch.h"
#include "convert/hf_text_model.h"
#include "gguf/gguf_writer.h"

namespace pagoda {
namespace {

Status write_metadata(const ConvertContext& c, HfVocab& vocab, GgufWriter& w) {
  PAGODA_TRY(write_text_model_keys(c, "llama", w));
  auto tc = read_optional_json_file((std::filesystem::path(c.dir) / "tokenizer_config.json").string());
  if (!tc) return tc.status();
  if (tc->has_value() && (*tc)->is_object())
    if (auto it = (*tc)->find("add_prefix_space"); it != (*tc)->end() && it->is_boolean())
      vocab.add_space_prefix = it->get<bool>();
  auto n_vocab = c.config.require_u32({"vocab_size"});
  if (!n_vocab) return n_vocab.status();
  w.set_u32("llama.vocab_size", *n_vocab);
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
    .vocab = HfVocabKind::kSentencePieceOrBpe,
    .write_metadata = write_metadata,
    .map_tensor = map_tensor,
    .extra_tensors = llama3_rope_freqs,
};

}  // namespace pagoda

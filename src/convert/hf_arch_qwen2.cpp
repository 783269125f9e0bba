// Qwen2 (Qwen2ForCausalLM): a Llama-shaped decoder with Q/K/V biases and no row
// permutation (its GGUF keeps HF's NeoX RoPE layout).
#include "convert/hf_arch.h"
#include "convert/hf_text_model.h"

namespace pagoda {
namespace {

Status write_metadata(const ConvertContext& c, HfVocab&, GgufWriter& w) {
  PAGODA_TRY(write_text_model_keys(c, "qwen2", w));
  return write_pooling_type(c, "qwen2", w);
}

Result<std::optional<TensorMapping>> map_tensor(const ConvertContext& c, const HfVocab&, std::string_view name) {
  return map_decoder_tensor(c, name, DecoderNaming{});
}

}  // namespace

extern const HfArch kHfArchQwen2 = {
    .gguf_name = "qwen2",
    .hf_classes = {"Qwen2ForCausalLM"},
    .vocab = HfVocabKind::kSentencePieceOrBpe,
    .write_metadata = write_metadata,
    .map_tensor = map_tensor,
};

}  // namespace pagoda

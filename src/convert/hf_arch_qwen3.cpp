// Qwen3 (Qwen3ForCausalLM): Qwen2's layout without the biases, plus per-head RMSNorm of
// Q and K (q_norm, k_norm).
#include "convert/hf_arch.h"
#include "convert/hf_text_model.h"

namespace pagoda {
namespace {

Status write_metadata(const ConvertContext& c, HfVocab&, GgufWriter& w) {
  PAGODA_TRY(write_text_model_keys(c, "qwen3", w));
  return write_pooling_type(c, "qwen3", w);
}

Result<std::optional<TensorMapping>> map_tensor(const ConvertContext& c, const HfVocab&, std::string_view name) {
  return map_decoder_tensor(c, name, DecoderNaming{.qk_norm = true});
}

}  // namespace

extern const HfArch kHfArchQwen3 = {
    .gguf_name = "qwen3",
    .hf_classes = {"Qwen3ForCausalLM"},
    .vocab = HfVocabKind::kSentencePieceOrBpe,
    .write_metadata = write_metadata,
    .map_tensor = map_tensor,
};

}  // namespace pagoda

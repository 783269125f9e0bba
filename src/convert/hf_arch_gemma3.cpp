// Gemma 3 (Gemma3ForCausalLM): norms before and after attention and FFN, per-head Q/K
// norms, tied output. HF's Gemma3RMSNorm multiplies by (1 + w); GGUF stores 1 + w, as
// llama.cpp's converter writes it. The defaults below are the ones that converter
// assumes where config.json leaves a key out. The vocabulary is Gemma's SentencePiece
// tokenizer.model (add_space_prefix false), or a byte-level BPE tokenizer.json.
#include "convert/hf_arch.h"
#include "convert/hf_text_model.h"
#include "gguf/gguf_writer.h"

namespace pagoda {
namespace {

Status write_metadata(const ConvertContext& c, HfVocab& vocab, GgufWriter& w) {
  const HfConfig& cfg = c.config;
  if (vocab.model == "llama") vocab.add_space_prefix = false;  // Gemma's SentencePiece model adds no dummy prefix
  PAGODA_TRY(write_text_model_keys(c, "gemma3", w));
  const auto u32_or = [&](const char* key, uint32_t fallback) -> Result<uint32_t> {
    if (!cfg.has(key)) return fallback;
    return cfg.require_u32({key});
  };
  auto ctx = u32_or("max_position_embeddings", 131072);
  auto heads = u32_or("num_attention_heads", 8);
  auto kv_heads = u32_or("num_key_value_heads", 4);
  auto head_dim = u32_or("head_dim", 256);
  for (const auto* r : {&ctx, &heads, &kv_heads, &head_dim})
    if (!*r) return r->status();
  w.set_u32("gemma3.context_length", *ctx);
  w.set_u32("gemma3.attention.head_count", *heads);
  w.set_f32("gemma3.attention.layer_norm_rms_epsilon",
            static_cast<float>(cfg.find_float({"rms_norm_eps"}).value_or(1e-6)));
  w.set_u32("gemma3.attention.key_length", *head_dim);
  w.set_u32("gemma3.attention.value_length", *head_dim);
  double theta = cfg.find_float({"rope_theta"}).value_or(1000000.0);
  if (auto rp = cfg.raw().find("rope_parameters"); rp != cfg.raw().end() && rp->is_object()) {
    const nlohmann::json& full = rp->contains("full_attention") ? (*rp)["full_attention"] : *rp;
    if (full.is_object() && full.contains("rope_theta") && full["rope_theta"].is_number())
      theta = full["rope_theta"].get<double>();
  }
  w.set_f32("gemma3.rope.freq_base", static_cast<float>(theta));
  if (cfg.has("attn_logit_softcapping"))
    return error("{}: attn_logit_softcapping is set, which Gemma 3 does not use", cfg.path());
  if (auto cap = cfg.find_float({"final_logit_softcapping"}); cap && *cap != 0)
    w.set_f32("gemma3.final_logit_softcapping", static_cast<float>(*cap));
  if (cfg.find_int({"sliding_window_pattern"}) != 1) {
    auto window = cfg.require_u32({"sliding_window"});
    if (!window) return window.status();
    w.set_u32("gemma3.attention.sliding_window", *window);
  }
  w.set_u32("gemma3.attention.head_count_kv", *kv_heads);
  return Status::ok();
}

Result<std::optional<TensorMapping>> map_tensor(const ConvertContext& c, const HfVocab& v, std::string_view name) {
  // The checkpoint's embedding may have padding rows past the tokenizer's tokens;
  // llama.cpp's converter cuts them off.
  return map_decoder_tensor(c, name,
                            DecoderNaming{.qk_norm = true,
                                          .post_norms = true,
                                          .norm_add_one = true,
                                          .embd_keep_rows = static_cast<int64_t>(v.hf_token_count)});
}

}  // namespace

extern const HfArch kHfArchGemma3 = {
    .gguf_name = "gemma3",
    .hf_classes = {"Gemma3ForCausalLM"},
    .vocab = HfVocabKind::kSentencePieceOrBpe,
    .write_metadata = write_metadata,
    .map_tensor = map_tensor,
};

}  // namespace pagoda

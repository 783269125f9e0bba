// What the text architectures share: the hyper-parameter keys llama.cpp's TextModel
// writes for every model (block count, widths, heads, RoPE base and scaling, norm
// epsilons, head width), and the tensor names of the Llama-style decoder checkpoints
// (model.layers.N.self_attn.q_proj ... -> blk.N.attn_q ...) with the per-family options.
// Pure functions of the config and names.
#pragma once

#include <optional>
#include <string_view>

#include "convert/hf_arch.h"

namespace pagoda {

Status write_text_model_keys(const ConvertContext& c, std::string_view arch, GgufWriter& w);

struct DecoderNaming {
  bool permute_qk = false;    // Llama: Q/K rows to GGUF's interleaved RoPE layout
  bool qk_norm = false;       // q_norm / k_norm per head (Qwen3, Gemma 3)
  bool post_norms = false;    // Gemma: norms after attention and FFN, pre_feedforward as ffn_norm
  bool norm_add_one = false;  // Gemma: norm weights stored as 1 + w
  int64_t embd_keep_rows = -1;
};

Result<std::optional<TensorMapping>> map_decoder_tensor(const ConvertContext& c, std::string_view hf_name,
                                                        const DecoderNaming& n);

// "<arch>.pooling_type" from a sentence-transformers folder (modules.json names the
// Pooling module, whose config.json says mean, CLS or last-token): llama.cpp's enum, 1
// mean, 2 CLS, 3 last. Nothing is written for a folder without modules.json.
Status write_pooling_type(const ConvertContext& c, std::string_view arch, GgufWriter& w);

// Llama 3's rope_freqs tensor when config's RoPE type is "llama3" (else none).
Result<std::vector<GeneratedTensor>> llama3_rope_freqs(const ConvertContext& c);

}  // namespace pagoda

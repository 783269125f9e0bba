// OLMo 2, as llama.cpp's olmo2 graph runs it: no norms before attention and the FFN (they
// read the residual stream itself); RMSNorms after each (blk.N.post_attention_norm and
// post_ffw_norm.weight) before the residual add; QK-norm over Q's and K's whole rows, one
// RMSNorm across all heads together (attn_q_norm of q_dim = n_embd values, attn_k_norm of
// kv_dim), before RoPE; SwiGLU; NeoX RoPE; q.k scaled by 1/sqrt(head_dim); an output
// matrix of its own. olmo2.attention.layer_norm_rms_epsilon is required, as llama.cpp
// requires it. OLMo 3 converts as olmo2 with olmo2.attention.sliding_window and a
// per-layer sliding_window_pattern (true: local; a number n instead means layers
// i % n < n - 1, and without the key every 4th layer is global); the local layers rotate
// with the file's RoPE base and no scaling (freq_scale 1, no YaRN, attn_factor 1), as
// llama.cpp's olmo2 graph runs them.
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "model/arch_spec.h"
#include "model/random_model.h"

namespace pagoda {
namespace {

constexpr int64_t kSlidingWindowPattern = 4;  // OLMo 3: layers i with i % 4 < 3 are local
constexpr const char* kPatternKey = "olmo2.attention.sliding_window_pattern";

// Which layers are local, as llama.cpp's load_swa_pattern reads them: a per-layer array
// first, else a number (0: every layer local), else the default of 4.
Status read_swa_pattern(const GgufFile& f, ModelConfig& c) {
  if (const GgufArray* arr = f.get_array(kPatternKey)) {
    if (static_cast<int64_t>(arr->values.size()) != c.n_layer)
      return error("{}: metadata {} has {} entries for {} layers", f.path(), kPatternKey, arr->values.size(), c.n_layer);
    for (int32_t l = 0; l < c.n_layer; ++l) {
      const auto v = arr->values[l].as_int();
      if (!v) return error("{}: metadata {} must hold booleans (one per layer)", f.path(), kPatternKey);
      c.layer_is_local[l] = *v != 0;
    }
    return Status::ok();
  }
  int64_t pattern = kSlidingWindowPattern;
  if (f.find(kPatternKey) != nullptr) {
    const auto p = f.get_int(kPatternKey);
    if (!p || *p < 0 || *p > c.n_layer)
      return error("{}: metadata {} must be a layer count (0..{}) or one boolean per layer", f.path(), kPatternKey,
                   c.n_layer);
    pattern = *p;
  }
  for (int32_t l = 0; l < c.n_layer; ++l) c.layer_is_local[l] = pattern == 0 || l % pattern < pattern - 1;
  return Status::ok();
}

Status configure(const GgufFile& f, ModelConfig& c) {
  configure_plain_decoder(c, RopeLayout::kNeox);
  auto eps = required_positive(f, "olmo2.attention.layer_norm_rms_epsilon");
  if (!eps) return eps.status();
  c.norm_eps = *eps;
  if (c.sliding_window <= 0) {
    c.sliding_window = 0;  // OLMo 2: every layer global
    return Status::ok();
  }
  PAGODA_TRY(read_swa_pattern(f, c));
  c.rope_local.freq_scale = 1.0f;
  c.rope_local.ext_factor = 0.0f;
  c.rope_local.attn_factor = 1.0f;
  return Status::ok();
}

// RandomModelSpec::swa_pattern > 0: OLMo 3's keys as the converter writes them (the window
// and one flag per layer, every swa_pattern-th layer global; an INT32 array, which
// llama.cpp reads as it reads the converter's booleans).
void write_random_metadata(const RandomModelSpec& s, GgufWriter& w) {
  if (s.swa_pattern <= 0) return;
  w.set_u32("olmo2.attention.sliding_window", s.sliding_window);
  std::vector<int32_t> local(s.layers);
  for (int32_t l = 0; l < s.layers; ++l) local[l] = (l + 1) % s.swa_pattern != 0;
  w.set_i32_array(kPatternKey, local);
}

// Only the inputs with a producer to fold into: the down projection's (the up rows of
// SwiGLU's product) and, with a KV head per query head, the attention output's (V's
// rows, added by awq_groups). Q/K/V and gate/up read the residual stream, which has no
// norm to divide: they stay at round to nearest (or GPTQ).
const std::vector<AwqGroupSpec>& olmo2_awq_groups() {
  static const std::vector<AwqGroupSpec> groups = {
      {LinearInput::kFfnDown, {"ffn_down"}, "ffn_up", true, "down"},
  };
  return groups;
}

}  // namespace

extern const ArchSpec kArchOlmo2 = {
    .name = "olmo2",
    .tensors = {.qk_norm_full = true, .post_norms = true, .no_pre_norms = true},
    .configure = configure,
    .awq_groups = olmo2_awq_groups,
    .write_random_metadata = write_random_metadata,
};

}  // namespace pagoda

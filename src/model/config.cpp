#include "model/config.h"

#include <cmath>

#include "gguf/gguf_file.h"
#include "model/arch_spec.h"

namespace pagoda {
namespace {

Result<int32_t> get_dim(const GgufFile& f, const std::string& key, bool required, int32_t fallback) {
  auto v = f.get_int(key);
  if (!v) {
    if (required) return error("{}: missing metadata key {}", f.path(), key);
    return fallback;
  }
  if (*v <= 0 || *v > (1 << 30)) return error("{}: metadata {} = {} is out of range", f.path(), key, *v);
  return static_cast<int32_t>(*v);
}

}  // namespace

namespace {

// RoPE scaling as llama.cpp reads it: rope.scaling.type (linear when absent; none turns a
// factor off; longrope scales like linear, its per-pair factors being tensors that
// Model::set_context_length picks), the factor, rope.scaling.attn_factor, and for YaRN
// the original context and llama.cpp's defaults for the rest (ext_factor 1, beta_fast 32,
// beta_slow 1), with the mscale llama.cpp's context derives (float operations in its
// order).
Status read_rope_scaling(const GgufFile& f, const std::string& a, int32_t n_ctx_train, RopeParams& r) {
  const std::string type = f.get_string(a + "rope.scaling.type").value_or("linear");
  if (type != "none" && type != "linear" && type != "yarn" && type != "longrope")
    return error("{}: rope scaling '{}' is not supported yet (linear, yarn and longrope are)", f.path(), type);
  const auto factor = static_cast<float>(f.get_float(a + "rope.scaling.factor").value_or(0.0));
  if (type != "none" && factor > 0.0f) r.freq_scale = 1.0f / factor;
  const auto attn_factor = static_cast<float>(f.get_float(a + "rope.scaling.attn_factor").value_or(1.0));
  r.attn_factor = attn_factor;
  if (type != "yarn") return Status::ok();
  r.ext_factor = static_cast<float>(f.get_float(a + "rope.scaling.yarn_ext_factor").value_or(1.0));
  const float scale = 1.0f / r.freq_scale;
  auto get_mscale = [](float s, float m) { return s <= 1.0f ? 1.0f : 0.1f * m * std::log(s) + 1.0f; };
  const auto log_mul = static_cast<float>(f.get_float(a + "rope.scaling.yarn_log_multiplier").value_or(0.0));
  float mscale = log_mul != 0.0f ? get_mscale(scale, 1.0f) / get_mscale(scale, log_mul) : get_mscale(scale, 1.0f);
  // rope_apply multiplies by 1 + 0.1 ln(scale) again; llama.cpp cancels it here.
  mscale *= 1.0f / (1.0f + 0.1f * std::log(scale));
  r.attn_factor = mscale * attn_factor;
  const int64_t orig = f.get_int(a + "rope.scaling.original_context_length").value_or(n_ctx_train);
  const auto beta_fast = static_cast<float>(f.get_float(a + "rope.scaling.yarn_beta_fast").value_or(32.0));
  const auto beta_slow = static_cast<float>(f.get_float(a + "rope.scaling.yarn_beta_slow").value_or(1.0));
  rope_yarn_corr_dims(r.rot_dims, static_cast<int32_t>(orig), r.freq_base, beta_fast, beta_slow, r.corr_dims);
  return Status::ok();
}

}  // namespace

Result<ModelConfig> read_config(const GgufFile& f) {
  ModelConfig c;
  auto arch = f.get_string("general.architecture");
  if (!arch) return error("{}: missing general.architecture", f.path());
  c.arch_name = *arch;
  c.arch = find_arch(*arch);
  if (c.arch == nullptr)
    return error("{}: architecture '{}' is not supported (supported: {})", f.path(), *arch, arch_names());
  const std::string a = *arch + ".";
#define PAGODA_DIM(field, key, req, fb)              \
  {                                                  \
    auto r = get_dim(f, a + key, req, fb);           \
    if (!r) return r.status();                       \
    c.field = *r;                                    \
  }
  PAGODA_DIM(n_embd, "embedding_length", true, 0);
  PAGODA_DIM(n_layer, "block_count", true, 0);
  PAGODA_DIM(n_head, "attention.head_count", true, 0);
  PAGODA_DIM(n_head_kv, "attention.head_count_kv", false, c.n_head);
  PAGODA_DIM(n_ff, "feed_forward_length", true, 0);
  PAGODA_DIM(n_ctx_train, "context_length", false, 4096);
  PAGODA_DIM(head_dim, "attention.key_length", false, c.n_embd / c.n_head);
#undef PAGODA_DIM
  auto vlen = f.get_int(a + "attention.value_length");
  if (vlen && *vlen != c.head_dim)
    return error("{}: attention.value_length {} differs from key_length {} (not supported)", f.path(), *vlen,
                 c.head_dim);
  if (c.n_head % c.n_head_kv != 0)
    return error("{}: head_count {} is not a multiple of head_count_kv {}", f.path(), c.n_head, c.n_head_kv);
  if (c.head_dim % 2 != 0) return error("{}: head dimension {} must be even for RoPE", f.path(), c.head_dim);
  if (auto eps = f.get_float(a + "attention.layer_norm_rms_epsilon")) c.norm_eps = static_cast<float>(*eps);
  c.attn_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));

  c.rope.rot_dims = c.head_dim;
  if (auto rd = f.get_int(a + "rope.dimension_count")) {
    if (*rd <= 0 || *rd > c.head_dim || *rd % 2 != 0)
      return error("{}: rope.dimension_count {} is invalid for head dimension {}", f.path(), *rd, c.head_dim);
    c.rope.rot_dims = static_cast<int32_t>(*rd);
  }
  c.rope.freq_base = static_cast<float>(f.get_float(a + "rope.freq_base").value_or(10000.0));
  PAGODA_TRY(read_rope_scaling(f, a, c.n_ctx_train, c.rope));
  c.rope_orig_ctx = c.n_ctx_train;
  if (auto orig = f.get_int(a + "rope.scaling.original_context_length")) {
    if (*orig <= 0 || *orig > (1 << 30))
      return error("{}: metadata {}rope.scaling.original_context_length = {} is out of range", f.path(), a, *orig);
    c.rope_orig_ctx = static_cast<int32_t>(*orig);
  }
  c.layer_is_local.assign(c.n_layer, false);
  c.layer_skips_rope.assign(c.n_layer, false);
  if (auto sw = f.get_int(a + "attention.sliding_window")) c.sliding_window = static_cast<int32_t>(*sw);
  return c;
}

}  // namespace pagoda

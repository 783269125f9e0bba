#include "model/config.h"

#include <algorithm>
#include <cmath>

#include "base/printable.h"
#include "gguf/gguf_file.h"
#include "model/arch_spec.h"

namespace pagoda {
namespace {

// Every count the model is built from is bounded before anything is sized by it, so a
// corrupt or hostile file gets one clear error instead of a huge allocation or a signed
// overflow in the products below (q_dim, kv_dim, row sizes): the bounds are far above
// any published model (the widest have n_embd 16384, n_ff 65536, 128 heads, 262k vocab).
constexpr int64_t kMaxWidth = int64_t{1} << 20;    // n_embd, n_ff, head_dim
constexpr int64_t kMaxHeads = int64_t{1} << 14;    // head_count, head_count_kv
constexpr int64_t kMaxPositions = int64_t{1} << 30;  // context and window lengths
constexpr int64_t kMaxProjection = int64_t{1} << 24;  // n_head * head_dim, and 3x that fused
constexpr int64_t kMaxExperts = 4096;  // the largest published MoE routes over 384

// An integer key in [lo, hi]. A value of a non-integer type, or one outside the range
// (a U64 of 2^40 included, which must not be truncated to 0 or 64), is an error naming
// the key; a missing key is `fallback` unless required.
Result<int32_t> get_dim(const GgufFile& f, const std::string& key, bool required, int32_t fallback, int64_t hi,
                        int64_t lo = 1) {
  const GgufValue* raw = f.find(key);
  if (raw == nullptr) {
    if (required) return error("{}: missing metadata key {}", f.path(), key);
    return fallback;
  }
  auto v = raw->as_int();
  if (!v || raw->type == GgufType::BOOL)
    return error("{}: metadata {} must be an integer (it has type {})", f.path(), key, gguf_type_name(raw->type));
  if (*v < lo || *v > hi) return error("{}: metadata {} = {} is out of range [{}, {}]", f.path(), key, *v, lo, hi);
  return static_cast<int32_t>(*v);
}

// Files written by llama.cpp's converter number layers blk.0 to blk.{n-1}; each layer
// has several tensors, so a block_count above the tensor count is corrupt, and checking
// it here keeps the per-layer vectors sized by the file, not by a number in it.
Status check_layer_count(const GgufFile& f, int32_t n_layer) {
  if (static_cast<size_t>(n_layer) > f.tensors().size())
    return error("{}: metadata block_count = {} is more than the file's {} tensors", f.path(), n_layer,
                 f.tensors().size());
  return Status::ok();
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
    return error("{}: rope scaling {} is not supported yet (linear, yarn and longrope are)", f.path(), in_quotes(type));
  const auto factor = static_cast<float>(f.get_float(a + "rope.scaling.factor").value_or(0.0));
  if (!std::isfinite(factor) || factor < 0.0f)
    return error("{}: metadata {}rope.scaling.factor = {} must be a finite number >= 0", f.path(), a, factor);
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
  if (orig <= 0 || orig > kMaxPositions)
    return error("{}: metadata {}rope.scaling.original_context_length = {} is out of range", f.path(), a, orig);
  const auto beta_fast = static_cast<float>(f.get_float(a + "rope.scaling.yarn_beta_fast").value_or(32.0));
  const auto beta_slow = static_cast<float>(f.get_float(a + "rope.scaling.yarn_beta_slow").value_or(1.0));
  rope_yarn_corr_dims(r.rot_dims, static_cast<int32_t>(orig), r.freq_base, beta_fast, beta_slow, r.corr_dims);
  return Status::ok();
}

// The experts of an MoE architecture (ArchSpec::moe), as llama.cpp reads them.
Status read_experts(const GgufFile& f, const std::string& a, ModelConfig& c) {
  const MoeSpec& moe = c.arch->moe;
  auto n = get_dim(f, a + "expert_count", false, 0, kMaxExperts, 0);
  if (!n) return n.status();
  if (*n == 0) {
    if (moe.required) return error("{}: {} needs metadata {}expert_count > 0", f.path(), c.arch_name, a);
    return Status::ok();
  }
  if (!moe.supported)
    return error("{}: {} has {} experts per layer; Pagoda runs experts in {}", f.path(), c.arch_name, *n, moe_arch_names());
  c.n_expert = *n;
  auto used = get_dim(f, a + "expert_used_count", true, 0, c.n_expert);
  if (!used) return used.status();
  c.n_expert_used = *used;
  c.expert_norm_weights = moe.norm_weights;
  c.n_ff_exp = c.n_ff;
  if (moe.expert_ff_key) {
    auto ff = get_dim(f, a + "expert_feed_forward_length", false, c.n_ff / c.n_expert_used, kMaxWidth);
    if (!ff) return ff.status();
    c.n_ff_exp = *ff;
    if (c.n_ff_exp <= 0)
      return error("{}: no {}expert_feed_forward_length and feed_forward_length {} / {} experts is 0", f.path(), a,
                   c.n_ff, c.n_expert_used);
  }
  if (moe.shared_expert) {
    auto ff = get_dim(f, a + "expert_shared_feed_forward_length", false, c.n_ff, kMaxWidth);
    if (!ff) return ff.status();
    c.n_ff_shexp = *ff;
  }
  return Status::ok();
}

}  // namespace

const char* pooling_name(Pooling p) {
  switch (p) {
    case Pooling::kMean: return "mean";
    case Pooling::kCls: return "cls";
    case Pooling::kLast: return "last";
    case Pooling::kRank: return "rank";
    case Pooling::kNone: break;
  }
  return "none";
}

Result<Pooling> pooling_from_name(std::string_view name) {
  for (Pooling p : {Pooling::kNone, Pooling::kMean, Pooling::kCls, Pooling::kLast, Pooling::kRank})
    if (name == pooling_name(p)) return p;
  return error("pooling {} is not one of none, mean, cls, last, rank", in_quotes(std::string(name)));
}

Result<ModelConfig> read_config(const GgufFile& f) {
  ModelConfig c;
  auto arch = f.get_string("general.architecture");
  if (!arch) return error("{}: missing general.architecture", f.path());
  c.arch_name = *arch;
  c.arch = find_arch(*arch);
  if (c.arch == nullptr)
    return error("{}: architecture {} is not supported (supported: {})", f.path(), in_quotes(*arch), arch_names());
  const std::string a = *arch + ".";
#define PAGODA_DIM(field, key, req, fb, hi)          \
  {                                                  \
    auto r = get_dim(f, a + key, req, fb, hi);       \
    if (!r) return r.status();                       \
    c.field = *r;                                    \
  }
  PAGODA_DIM(n_embd, "embedding_length", true, 0, kMaxWidth);
  PAGODA_DIM(n_layer, "block_count", true, 0, kMaxPositions);
  PAGODA_TRY(check_layer_count(f, c.n_layer));
  PAGODA_DIM(n_head, "attention.head_count", true, 0, kMaxHeads);
  PAGODA_DIM(n_head_kv, "attention.head_count_kv", false, c.n_head, kMaxHeads);
  PAGODA_DIM(n_ff, "feed_forward_length", true, 0, kMaxWidth);
  PAGODA_DIM(n_ctx_train, "context_length", false, 4096, kMaxPositions);
  PAGODA_DIM(head_dim, "attention.key_length", false, std::max(1, c.n_embd / c.n_head), kMaxWidth);
#undef PAGODA_DIM
  if (int64_t{c.n_head} * c.head_dim > kMaxProjection)
    return error("{}: head_count {} x key_length {} = {} is out of range (at most {})", f.path(), c.n_head,
                 c.head_dim, int64_t{c.n_head} * c.head_dim, kMaxProjection);
  auto vlen = f.get_int(a + "attention.value_length");
  if (vlen && *vlen != c.head_dim)
    return error("{}: attention.value_length {} differs from key_length {} (not supported)", f.path(), *vlen,
                 c.head_dim);
  if (c.n_head % c.n_head_kv != 0)
    return error("{}: head_count {} is not a multiple of head_count_kv {}", f.path(), c.n_head, c.n_head_kv);
  if (c.head_dim % 2 != 0) return error("{}: head dimension {} must be even for RoPE", f.path(), c.head_dim);
  if (auto eps = f.get_float(a + "attention.layer_norm_rms_epsilon")) c.norm_eps = static_cast<float>(*eps);
  if (!(c.norm_eps >= 0.0f && c.norm_eps < 1.0f))
    return error("{}: metadata {}attention.layer_norm_rms_epsilon = {} is out of range [0, 1)", f.path(), a,
                 c.norm_eps);
  c.attn_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));

  c.rope.rot_dims = c.head_dim;
  if (auto rd = f.get_int(a + "rope.dimension_count")) {
    if (*rd <= 0 || *rd > c.head_dim || *rd % 2 != 0)
      return error("{}: rope.dimension_count {} is invalid for head dimension {}", f.path(), *rd, c.head_dim);
    c.rope.rot_dims = static_cast<int32_t>(*rd);
  }
  c.rope.freq_base = static_cast<float>(f.get_float(a + "rope.freq_base").value_or(10000.0));
  if (!(c.rope.freq_base > 0.0f) || !std::isfinite(c.rope.freq_base))
    return error("{}: metadata {}rope.freq_base = {} must be a positive finite number", f.path(), a, c.rope.freq_base);
  PAGODA_TRY(read_rope_scaling(f, a, c.n_ctx_train, c.rope));
  c.rope_orig_ctx = c.n_ctx_train;
  if (auto orig = f.get_int(a + "rope.scaling.original_context_length")) {
    if (*orig <= 0 || *orig > (1 << 30))
      return error("{}: metadata {}rope.scaling.original_context_length = {} is out of range", f.path(), a, *orig);
    c.rope_orig_ctx = static_cast<int32_t>(*orig);
  }
  c.layer_is_local.assign(c.n_layer, false);
  c.layer_skips_rope.assign(c.n_layer, false);
  auto sw = get_dim(f, a + "attention.sliding_window", false, 0, kMaxPositions, 0);
  if (!sw) return sw.status();
  c.sliding_window = *sw;
  PAGODA_TRY(read_experts(f, a, c));
  if (const GgufValue* v = f.find(a + "attention.causal")) {
    if (v->type != GgufType::BOOL) return error("{}: metadata {}attention.causal must be a bool", f.path(), a);
    c.causal = f.get_bool(a + "attention.causal").value_or(true);
  }
  // llama.cpp's enum: -1 unspecified, 0 none, 1 mean, 2 cls, 3 last, 4 rank (a reranker's
  // classification head; Model::load checks the file has one).
  if (f.find(a + "pooling_type") != nullptr) {
    auto p = get_dim(f, a + "pooling_type", false, 0, 4, -1);
    if (!p) return p.status();
    c.pooling = *p < 0 ? Pooling::kNone : static_cast<Pooling>(*p);
  }
  return c;
}

}  // namespace pagoda

#include "convert/hf_text_model.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <numbers>

#include "base/printable.h"
#include "gguf/gguf_writer.h"

namespace pagoda {
namespace {

using nlohmann::json;

std::optional<double> num(const json& j, std::string_view key) {
  if (!j.is_object()) return std::nullopt;
  const auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

std::string str(const json& j, std::string_view key) {
  if (!j.is_object()) return "";
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

// llama.cpp's rope_parameters: "rope_parameters" or "rope_scaling", with the top-level
// theta and type mirrored into it; the full-attention entry when it is split by layer kind.
struct RopeParams {
  json all = json::object();
  json full = json::object();
};

RopeParams rope_params(const HfConfig& cfg) {
  RopeParams r;
  for (const char* key : {"rope_parameters", "rope_scaling"})
    if (auto it = cfg.raw().find(key); it != cfg.raw().end() && it->is_object()) {
      r.all = *it;
      break;
    }
  if (!r.all.contains("full_attention") && !r.all.contains("sliding_attention")) {
    auto local = cfg.find_float(
        {"local_rope_theta", "rope_local_theta", "rope_theta_local", "swa_rope_theta", "rope_local_base_freq"});
    auto theta = cfg.find_float(
        {"global_rope_theta", "rope_global_theta", "rope_theta_global", "rope_theta", "rotary_emb_base"});
    if (local) r.all["sliding_attention"] = json{{"rope_theta", *local}};
    if (!r.all.contains("rope_theta") && theta) r.all["rope_theta"] = *theta;
    if (!r.all.contains("rope_type") && r.all.contains("type")) r.all["rope_type"] = r.all["type"];
  }
  r.full = r.all.contains("full_attention") && r.all["full_attention"].is_object() ? r.all["full_attention"] : r.all;
  return r;
}

bool parse_layer(std::string_view s, int64_t& layer, std::string_view& rest) {
  const size_t dot = s.find('.');
  if (dot == std::string_view::npos || dot == 0) return false;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + dot, layer);
  if (ec != std::errc() || p != s.data() + dot) return false;
  rest = s.substr(dot + 1);
  return true;
}

}  // namespace

Status write_text_model_keys(const ConvertContext& c, std::string_view arch, GgufWriter& w) {
  const HfConfig& cfg = c.config;
  const std::string a(arch);
  auto blocks = cfg.require_u32({"n_layers", "num_hidden_layers", "n_layer", "num_layers"});
  if (!blocks) return blocks.status();
  w.set_u32(a + ".block_count", *blocks);
  const auto u32 = [&](std::initializer_list<std::string_view> keys, const std::string& gguf_key) -> Status {
    if (!cfg.find_int(keys)) return Status::ok();
    auto v = cfg.require_u32(keys);
    if (!v) return v.status();
    w.set_u32(a + gguf_key, *v);
    return Status::ok();
  };
  PAGODA_TRY(
      u32({"max_position_embeddings", "n_ctx", "n_positions", "max_length", "max_sequence_length", "model_max_length"},
          ".context_length"));
  PAGODA_TRY(u32({"hidden_size", "n_embd", "dim"}, ".embedding_length"));
  PAGODA_TRY(
      u32({"prefix_dense_intermediate_size", "dense_intermediate_size", "intermediate_size", "n_inner", "hidden_dim"},
          ".feed_forward_length"));
  PAGODA_TRY(u32({"num_attention_heads", "n_head", "n_heads"}, ".attention.head_count"));
  PAGODA_TRY(u32({"num_key_value_heads", "n_kv_heads"}, ".attention.head_count_kv"));
  if (cfg.find_bool("is_causal") == false) w.set_bool(a + ".attention.causal", false);

  const RopeParams rope = rope_params(cfg);
  const std::string rope_type = str(rope.full, "rope_type");
  const auto factor = num(rope.full, "factor");
  if (rope_type == "linear" && factor) {
    w.set_string(a + ".rope.scaling.type", "linear");
    w.set_f32(a + ".rope.scaling.factor", static_cast<float>(*factor));
  } else if (rope_type == "yarn" && factor) {
    w.set_string(a + ".rope.scaling.type", "yarn");
    w.set_f32(a + ".rope.scaling.factor", static_cast<float>(*factor));
    const auto orig = num(rope.full, "original_max_position_embeddings");
    if (!orig || *orig < 0) return error("{}: yarn RoPE scaling without original_max_position_embeddings", cfg.path());
    w.set_u32(a + ".rope.scaling.original_context_length", static_cast<uint32_t>(*orig));
    if (auto v = num(rope.full, "extrapolation_factor"))
      w.set_f32(a + ".rope.scaling.yarn_ext_factor", static_cast<float>(*v));
    auto attn = num(rope.full, "attention_factor");
    if (!attn) attn = num(rope.full, "attn_factor");
    if (attn) w.set_f32(a + ".rope.scaling.yarn_attn_factor", static_cast<float>(*attn));
    if (auto v = num(rope.full, "beta_fast")) w.set_f32(a + ".rope.scaling.yarn_beta_fast", static_cast<float>(*v));
    if (auto v = num(rope.full, "beta_slow")) w.set_f32(a + ".rope.scaling.yarn_beta_slow", static_cast<float>(*v));
  } else if (!rope_type.empty() && rope_type != "default" && !(rope_type == "llama3" && arch == "llama") &&
             !((rope_type == "linear" || rope_type == "yarn") && !factor)) {
    return error("{}: RoPE scaling type '{}' is not supported (linear, yarn, llama3 for Llama)", cfg.path(),
                 printable(rope_type, 40));
  }
  if (auto theta = num(rope.full, "rope_theta")) w.set_f32(a + ".rope.freq_base", static_cast<float>(*theta));
  if (rope.all.contains("sliding_attention"))
    if (auto local = num(rope.all["sliding_attention"], "rope_theta"))
      w.set_f32(a + ".rope.freq_base_swa", static_cast<float>(*local));
  if (auto eps = cfg.find_float({"rms_norm_eps", "norm_eps"}))
    w.set_f32(a + ".attention.layer_norm_rms_epsilon", static_cast<float>(*eps));
  if (auto eps = cfg.find_float({"layer_norm_eps", "layer_norm_epsilon", "norm_epsilon"}))
    w.set_f32(a + ".attention.layer_norm_epsilon", static_cast<float>(*eps));
  if (cfg.find_int({"num_local_experts", "num_experts", "n_routed_experts"}))
    return error("{}: mixture-of-experts checkpoints are not converted", cfg.path());
  if (cfg.has("head_dim")) {
    auto hd = cfg.require_u32({"head_dim"});
    if (!hd) return hd.status();
    w.set_u32(a + ".attention.key_length", *hd);
    w.set_u32(a + ".attention.value_length", *hd);
  }
  return Status::ok();
}

Result<std::optional<TensorMapping>> map_decoder_tensor(const ConvertContext& c, std::string_view name,
                                                        const DecoderNaming& n) {
  using Out = std::optional<TensorMapping>;
  const HfConfig& cfg = c.config;
  if (name.ends_with(".rotary_emb.inv_freq") || name.ends_with(".attention.masked_bias") ||
      name.ends_with(".attention.bias"))
    return Out();
  if (name == "lm_head.weight") {
    if (cfg.find_bool("tie_word_embeddings").value_or(false)) return Out();  // the embedding serves as output
    return Out(TensorMapping{.name = "output.weight"});
  }
  std::string_view s = name;
  if (s.starts_with("model.")) s.remove_prefix(6);
  TensorMapping m;
  const auto norm = [&](std::string gguf) {
    m.name = std::move(gguf);
    if (n.norm_add_one) m.transform = TensorTransform::kAddOne;
    return Out(m);
  };
  if (s == "embed_tokens.weight") {
    m.name = "token_embd.weight";
    m.keep_rows = n.embd_keep_rows;
    return Out(m);
  }
  if (s == "norm.weight") return norm("output_norm.weight");
  int64_t layer = -1;
  std::string_view rest;
  if (!s.starts_with("layers.") || !parse_layer(s.substr(7), layer, rest))
    return error("tensor '{}' is not one this architecture maps", printable(name, 200));
  const int64_t blocks = cfg.find_int({"num_hidden_layers", "n_layers", "n_layer", "num_layers"}).value_or(0);
  if (layer < 0 || layer >= blocks)
    return error("tensor '{}' belongs to layer {}, but config.json has {} layers", printable(name, 200), layer, blocks);
  const std::string blk = fmt::format("blk.{}.", layer);
  const int64_t heads = cfg.find_int({"num_attention_heads", "n_heads"}).value_or(0);
  const int64_t kv_heads = cfg.find_int({"num_key_value_heads", "n_kv_heads"}).value_or(heads);
  struct Proj {
    std::string_view hf, gguf;
  };
  static constexpr Proj kProjs[] = {{"self_attn.q_proj", "attn_q"}, {"self_attn.k_proj", "attn_k"},
                                    {"self_attn.v_proj", "attn_v"}, {"self_attn.o_proj", "attn_output"},
                                    {"mlp.gate_proj", "ffn_gate"},  {"mlp.up_proj", "ffn_up"},
                                    {"mlp.down_proj", "ffn_down"}};
  for (const Proj& p : kProjs) {
    for (std::string_view suffix : {".weight", ".bias"}) {
      if (rest.size() != p.hf.size() + suffix.size() || !rest.starts_with(p.hf) || !rest.ends_with(suffix)) continue;
      m.name = blk + std::string(p.gguf) + std::string(suffix);
      if (n.permute_qk && (p.gguf == "attn_q" || p.gguf == "attn_k")) {
        m.transform = TensorTransform::kRopePermute;
        m.permute_heads = static_cast<int32_t>(p.gguf == "attn_q" ? heads : kv_heads);
      }
      return Out(m);
    }
  }
  if (rest == "input_layernorm.weight") return norm(blk + "attn_norm.weight");
  if (rest == "post_attention_layernorm.weight")
    return norm(blk + (n.post_norms ? "post_attention_norm.weight" : "ffn_norm.weight"));
  if (n.post_norms && rest == "pre_feedforward_layernorm.weight") return norm(blk + "ffn_norm.weight");
  if (n.post_norms && rest == "post_feedforward_layernorm.weight") return norm(blk + "post_ffw_norm.weight");
  if (n.qk_norm && rest == "self_attn.q_norm.weight") return norm(blk + "attn_q_norm.weight");
  if (n.qk_norm && rest == "self_attn.k_norm.weight") return norm(blk + "attn_k_norm.weight");
  return error("tensor '{}' is not one this architecture maps", printable(name, 200));
}

Status write_pooling_type(const ConvertContext& c, std::string_view arch, GgufWriter& w) {
  namespace fs = std::filesystem;
  const std::string modules_path = (fs::path(c.dir) / "modules.json").string();
  auto modules = read_optional_json_file(modules_path);
  if (!modules) return modules.status();
  if (!modules->has_value()) return Status::ok();
  if (!(*modules)->is_array()) return error("{}: not a list of modules", modules_path);
  std::string pooling_dir;
  for (const json& m : **modules)
    if (str(m, "type").ends_with("Pooling")) {
      pooling_dir = str(m, "path");
      break;
    }
  if (pooling_dir.empty()) return Status::ok();
  if (pooling_dir.find("..") != std::string::npos || pooling_dir.starts_with("/"))
    return error("{}: pooling module path '{}' leaves the model folder", modules_path, printable(pooling_dir, 100));
  const std::string pooling_path = (fs::path(c.dir) / pooling_dir / "config.json").string();
  auto pooling = read_json_file(pooling_path);
  if (!pooling) return pooling.status();
  const auto flag = [&](const char* key) {
    const auto it = pooling->is_object() ? pooling->find(key) : pooling->end();
    return it != pooling->end() && it->is_boolean() && it->get<bool>();
  };
  uint32_t type = 0;  // llama.cpp's LLAMA_POOLING_TYPE: 1 mean, 2 CLS, 3 last
  const std::string mode = str(*pooling, "pooling_mode");
  if (flag("pooling_mode_mean_tokens"))
    type = 1;
  else if (flag("pooling_mode_cls_token"))
    type = 2;
  else if (flag("pooling_mode_lasttoken"))
    type = 3;
  else if (mode == "mean")
    type = 1;
  else if (mode == "cls")
    type = 2;
  else if (mode == "lasttoken")
    type = 3;
  else
    return error("{}: only mean, CLS and last-token pooling are supported", pooling_path);
  w.set_u32(std::string(arch) + ".pooling_type", type);
  return Status::ok();
}

Result<std::vector<GeneratedTensor>> llama3_rope_freqs(const ConvertContext& c) {
  const RopeParams rope = rope_params(c.config);
  std::string type = str(rope.full, "rope_type");
  for (char& ch : type) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (type != "llama3") return std::vector<GeneratedTensor>();
  const double base = num(rope.full, "rope_theta").value_or(10000.0);
  int64_t dim = c.config.find_int({"head_dim"}).value_or(0);
  if (dim <= 0) {
    const int64_t heads = c.config.find_int({"num_attention_heads"}).value_or(0);
    const int64_t embd = c.config.find_int({"hidden_size"}).value_or(0);
    if (heads <= 0 || embd <= 0) return error("{}: hidden_size / num_attention_heads missing", c.config.path());
    dim = embd / heads;
  }
  const double factor = num(rope.full, "factor").value_or(8.0);
  const double low = num(rope.full, "low_freq_factor").value_or(1.0);
  const double high = num(rope.full, "high_freq_factor").value_or(4.0);
  const double old_ctx = num(rope.full, "original_max_position_embeddings").value_or(8192.0);
  const double low_wavelen = old_ctx / low, high_wavelen = old_ctx / high;
  GeneratedTensor t{.name = "rope_freqs.weight", .values = {}};
  for (int64_t i = 0; i < dim; i += 2) {
    // As the converter computes it in float32 before widening.
    const float freq = 1.0f / std::pow(static_cast<float>(base), static_cast<float>(i) / static_cast<float>(dim));
    const double wavelen = 2 * std::numbers::pi / freq;
    double f;
    if (wavelen < high_wavelen) {
      f = 1;
    } else if (wavelen > low_wavelen) {
      f = factor;
    } else {
      const double smooth = (old_ctx / wavelen - low) / (high - low);
      f = 1 / ((1 - smooth) / factor + smooth);
    }
    t.values.push_back(static_cast<float>(f));
  }
  return std::vector<GeneratedTensor>{std::move(t)};
}

}  // namespace pagoda

#include "model/random_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "base/thread_pool.h"
#include "gguf/gguf_writer.h"
#include "model/arch_spec.h"
#include "quant/formats.h"
#include "quant/w8a8.h"

namespace pagoda {
namespace {

uint64_t splitmix(uint64_t& s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Standard normal by Box-Muller from two uniforms.
void fill_normal(uint64_t seed, float* out, int64_t n, float stddev, float mean) {
  uint64_t s = seed;
  for (int64_t i = 0; i < n; i += 2) {
    const double u1 = (static_cast<double>(splitmix(s) >> 11) + 1.0) * 0x1.0p-53;
    const double u2 = static_cast<double>(splitmix(s) >> 11) * 0x1.0p-53;
    const double r = std::sqrt(-2.0 * std::log(u1));
    out[i] = mean + stddev * static_cast<float>(r * std::cos(2 * M_PI * u2));
    if (i + 1 < n) out[i + 1] = mean + stddev * static_cast<float>(r * std::sin(2 * M_PI * u2));
  }
}

std::vector<std::string> make_vocab(int n, std::span<const char* const> control, std::vector<int32_t>& types,
                                    std::vector<float>& scores) {
  std::vector<std::string> pieces = {"<unk>", "<s>", "</s>"};
  types = {2, 3, 3};
  for (int b = 0; b < 256; ++b) {
    pieces.push_back(fmt::format("<0x{:02X}>", b));
    types.push_back(6);
  }
  const std::string space = "\xe2\x96\x81";
  for (char ch = 'a'; ch <= 'z' && static_cast<int>(pieces.size()) < n; ++ch) {
    pieces.push_back(std::string(1, ch));
    types.push_back(1);
    if (static_cast<int>(pieces.size()) < n) {
      pieces.push_back(space + std::string(1, ch));
      types.push_back(1);
    }
  }
  for (int i = static_cast<int>(pieces.size()); i < n; ++i) {
    pieces.push_back(fmt::format("[{}]", i));
    types.push_back(1);
  }
  pieces.resize(n);
  types.resize(n);
  // The architecture's control tokens take the last ids (write_random_model checked that
  // they leave the bytes and letters alone).
  const size_t first_control = static_cast<size_t>(n) - control.size();
  for (size_t i = 0; i < control.size(); ++i) {
    pieces[first_control + i] = control[i];
    types[first_control + i] = 3;
  }
  scores.resize(n);
  for (int i = 0; i < n; ++i) scores[i] = -static_cast<float>(i);
  return pieces;
}

// The hyper-parameters and the SentencePiece-style vocabulary (make_vocab) as GGUF keys.
void write_metadata(const RandomModelSpec& s, const ArchSpec& arch, const std::string& type_name, GgufWriter& w) {
  const bool w8a8 = s.type == DType::I8;
  const std::string p = s.arch + ".";
  w.set_string("general.architecture", s.arch);
  w.set_string("general.name", fmt::format("pagoda-random-{}-{}", s.arch, type_name));
  // llama.cpp's file-type code for a file whose matrices are all of one format, so tools
  // label generated models by format ("Q4_0", "Q4_K - Small") rather than "all F32".
  // llama.cpp has no file type for W8A8; the pagoda key says what the file is instead.
  if (w8a8) w.set_string(std::string(kW8A8FormatKey), std::string(kW8A8FormatName));
  else w.set_u32("general.file_type", static_cast<uint32_t>(std::max(0, dtype_info(s.type).file_type)));
  w.set_u32(p + "context_length", s.ctx);
  w.set_u32(p + "embedding_length", s.dim);
  w.set_u32(p + "block_count", s.layers);
  w.set_u32(p + "feed_forward_length", s.ff);
  w.set_u32(p + "attention.head_count", s.heads);
  w.set_u32(p + "attention.head_count_kv", s.kv_heads);
  w.set_u32(p + "attention.key_length", s.head_dim);
  w.set_u32(p + "attention.value_length", s.head_dim);
  w.set_u32(p + "rope.dimension_count", s.rope_dims);
  w.set_f32(p + "attention.layer_norm_rms_epsilon", 1e-6f);
  w.set_f32(p + "rope.freq_base", 10000.0f);
  if (!s.rope_scaling.empty()) {
    w.set_string(p + "rope.scaling.type", s.rope_scaling);
    w.set_f32(p + "rope.scaling.factor", s.rope_factor);
    if (s.rope_scaling == "yarn") w.set_u32(p + "rope.scaling.original_context_length", s.rope_orig_ctx);
  }
  if (s.longrope) {
    // As the converter writes Phi-3's: the original context and LongRoPE's attention factor.
    w.set_u32(p + "rope.scaling.original_context_length", s.rope_orig_ctx);
    const double scale = static_cast<double>(s.ctx) / s.rope_orig_ctx;
    w.set_f32(p + "rope.scaling.attn_factor",
              scale > 1.0 ? static_cast<float>(std::sqrt(1.0 + std::log(scale) / std::log(s.rope_orig_ctx))) : 1.0f);
  }
  if (s.experts > 0) {
    w.set_u32(p + "expert_count", s.experts);
    w.set_u32(p + "expert_used_count", s.experts_used);
    if (arch.moe.expert_ff_key) w.set_u32(p + "expert_feed_forward_length", s.expert_ff);
    if (arch.moe.shared_expert) w.set_u32(p + "expert_shared_feed_forward_length", s.shared_expert_ff);
  }
  if (arch.write_random_metadata != nullptr) arch.write_random_metadata(s, w);
  std::vector<int32_t> types;
  std::vector<float> scores;
  auto pieces = make_vocab(s.vocab, arch.random_control_tokens, types, scores);
  w.set_string("tokenizer.ggml.model", "llama");
  w.set_string("tokenizer.ggml.pre", "default");
  w.set_string_array("tokenizer.ggml.tokens", pieces);
  w.set_f32_array("tokenizer.ggml.scores", scores);
  w.set_i32_array("tokenizer.ggml.token_type", types);
  w.set_u32("tokenizer.ggml.unknown_token_id", 0);
  w.set_u32("tokenizer.ggml.bos_token_id", 1);
  w.set_u32("tokenizer.ggml.eos_token_id", 2);
  w.set_bool("tokenizer.ggml.add_bos_token", true);
  w.set_bool("tokenizer.ggml.add_eos_token", false);
  w.set_bool("tokenizer.ggml.add_space_prefix", true);
}

}  // namespace

Status write_random_model(const RandomModelSpec& spec, const std::string& path) {
  RandomModelSpec s = spec;
  const ArchSpec* arch = find_arch(s.arch);
  if (arch == nullptr) return error("random model: architecture '{}' is not registered ({})", s.arch, arch_names());
  const bool w8a8 = s.type == DType::I8;
  const std::string type_name = w8a8 ? std::string(kW8A8FormatName) : std::string(dtype_name(s.type));
  if (!w8a8 && !can_quantize(s.type))
    return error("random model: Pagoda cannot write {} tensors", dtype_name(s.type));
  if (s.vocab < 262) return error("random model: vocab must be at least 262 (3 specials + 256 byte tokens + letters)");
  if (!arch->random_control_tokens.empty() &&
      s.vocab < 3 + 256 + 52 + static_cast<int32_t>(arch->random_control_tokens.size()))
    return error("random model: vocab must be at least {} for {} (specials, bytes, letters and its {} control tokens)",
                 3 + 256 + 52 + arch->random_control_tokens.size(), s.arch, arch->random_control_tokens.size());
  if (s.dim <= 0 || s.layers <= 0 || s.heads <= 0 || s.kv_heads <= 0 || s.ff <= 0)
    return error("random model: sizes must be positive");
  if (s.head_dim == 0) s.head_dim = s.dim / s.heads;
  if (s.rope_dims == 0) s.rope_dims = s.head_dim;
  if (s.rope_dims < 0 || s.rope_dims > s.head_dim || s.rope_dims % 2 != 0)
    return error("random model: rope dims {} must be even and at most the head dimension {}", s.rope_dims, s.head_dim);
  if (s.longrope && !s.rope_scaling.empty())
    return error("random model: LongRoPE and --rope-scaling {} both set the original context; pick one", s.rope_scaling);
  if (s.longrope && !arch->tensors.longrope)
    return error("random model: {} has no LongRoPE factors (architectures with them: phi3)", s.arch);
  if (s.longrope && (s.rope_orig_ctx <= 1 || s.rope_orig_ctx > s.ctx))
    return error("random model: LongRoPE's original context {} must be in 2..{} (the context)", s.rope_orig_ctx, s.ctx);
  if (s.swa_pattern < 0 || (s.swa_pattern > 0 && s.arch != "olmo2"))
    return error("random model: a sliding-window pattern applies to olmo2 (OLMo 3's layers) only, and must be positive");
  if (s.swa_pattern > 0 && s.sliding_window <= 0) return error("random model: the sliding window must be positive");
  if (s.heads % s.kv_heads != 0) return error("random model: heads must be a multiple of kv_heads");
  if (s.experts == 0 && arch->moe.required) {
    s.experts = 4;
    if (s.experts_used == 0) s.experts_used = 2;
  }
  if (s.experts < 0 || (s.experts > 0 && !arch->moe.supported))
    return error("random model: {} has no experts (architectures with them: {})", s.arch, moe_arch_names());
  if (s.experts > 0 && (s.experts_used <= 0 || s.experts_used > s.experts))
    return error("random model: experts per token must be in 1..{} (the experts)", s.experts);
  if (s.experts == 0 && (s.experts_used != 0 || s.expert_ff != 0 || s.shared_expert_ff != 0 || s.router_skew != 0.0f))
    return error("random model: expert options need --experts");
  if (s.experts > 0 && s.arch == "olmoe" && s.kv_heads != s.heads)
    return error("random model: olmoe's K norm spans n_embd, so llama.cpp loads it only with kv_heads == heads");
  if (s.experts > 0 && w8a8) return error("random model: W8A8 has no expert tensors; write experts as Q8_0");
  if (s.experts > 0 && !arch->moe.expert_ff_key && s.expert_ff != 0 && s.expert_ff != s.ff)
    return error("random model: {}'s experts are feed_forward_length wide; set --ff, not --expert-ff", s.arch);
  if (s.expert_ff == 0) s.expert_ff = s.ff;
  if (s.shared_expert_ff == 0 && arch->moe.shared_expert && s.experts > 0) s.shared_expert_ff = s.ff;
  if (s.expert_ff < 0 || s.shared_expert_ff < 0) return error("random model: expert widths must be positive");
  const int64_t bs = dtype_info(s.type).block_size;
  const int q_dim = s.heads * s.head_dim, kv_dim = s.kv_heads * s.head_dim;
  for (int64_t cols : {static_cast<int64_t>(s.dim), static_cast<int64_t>(s.experts > 0 ? s.expert_ff : s.ff),
                       static_cast<int64_t>(s.shared_expert_ff > 0 ? s.shared_expert_ff : s.dim), static_cast<int64_t>(q_dim)})
    if (cols % bs != 0)
      return error("random model: row width {} is not a multiple of {}'s block size {}", cols, dtype_name(s.type), bs);
  GgufWriter w;
  write_metadata(s, *arch, type_name, w);

  uint64_t tensor_seed = s.seed * 1000003ull;
  // A matrix [rows x cols] in the chosen format, N(0, scale / sqrt(cols)).
  // experts > 0: a 3-D tensor of that many [rows x cols] matrices. row_mean(r): the mean of
  // row r's values (0 unless a router leans toward some experts); type: F32 for a router,
  // which llama-quantize never quantizes.
  auto tensor = [&](const std::string& name, int64_t rows, int64_t cols, float scale, int64_t experts,
                    std::function<float(int64_t)> row_mean, DType t) {
    const uint64_t seed = ++tensor_seed;
    const std::vector<int64_t> shape =
        experts > 0 ? std::vector<int64_t>{cols, rows, experts} : std::vector<int64_t>{cols, rows};
    if (experts > 0) rows *= experts;
    const float stddev = scale / std::sqrt(static_cast<float>(cols));
    if (t == DType::I8) {
      // The quants and their row scales, each tensor filled by regenerating the rows (the
      // writer asks for one tensor at a time); the values equal those of any other format.
      auto rows_w8a8 = [=](int8_t* q, float* scales) {
        ThreadPool::global().parallel_for(rows, 16, [&](int64_t r0, int64_t r1, int) {
          std::vector<float> row(cols);
          std::vector<int8_t> scratch(q == nullptr ? cols : 0);
          for (int64_t r = r0; r < r1; ++r) {
            fill_normal(seed * 0x100000001b3ull + static_cast<uint64_t>(r), row.data(), cols, stddev, 0.0f);
            int8_t* dst = q != nullptr ? q + r * cols : scratch.data();
            const float d = quantize_row_w8a8(row.data(), dst, cols);
            if (scales != nullptr) scales[r] = d;
          }
        });
      };
      w.add_tensor(name, {cols, rows}, DType::I8,
                   [=](uint8_t* dst) { rows_w8a8(reinterpret_cast<int8_t*>(dst), nullptr); });
      w.add_tensor(name + std::string(kW8A8ScaleSuffix), {rows}, DType::F32,
                   [=](uint8_t* dst) { rows_w8a8(nullptr, reinterpret_cast<float*>(dst)); });
      return;
    }
    w.add_tensor(name, shape, t, [=](uint8_t* dst) {
      const size_t rb = row_bytes(t, cols);
      ThreadPool::global().parallel_for(rows, 16, [&](int64_t r0, int64_t r1, int) {
        std::vector<float> row(cols);
        for (int64_t r = r0; r < r1; ++r) {
          fill_normal(seed * 0x100000001b3ull + static_cast<uint64_t>(r), row.data(), cols, stddev,
                      row_mean ? row_mean(r) : 0.0f);
          quantize_row(t, row.data(), dst + static_cast<size_t>(r) * rb, cols);
        }
      });
    });
  };
  auto matrix = [&](const std::string& name, int64_t rows, int64_t cols, float scale) {
    tensor(name, rows, cols, scale, 0, nullptr, s.type);
  };
  // Norm weights near 1, biases near 0: F32 vectors as converters write them.
  auto vec = [&](const std::string& name, int64_t n, float mean, float stddev) {
    const uint64_t seed = ++tensor_seed;
    w.add_tensor(name, {n}, DType::F32, [=](uint8_t* dst) {
      fill_normal(seed, reinterpret_cast<float*>(dst), n, stddev, mean);
    });
  };
  // A skewed router leans toward a common offset of the embeddings.
  const float embd_mean = s.router_skew > 0.0f ? 0.5f : 0.0f;
  tensor("token_embd.weight", s.vocab, s.dim, std::sqrt(static_cast<float>(s.dim)), 0,
         embd_mean != 0.0f ? std::function<float(int64_t)>([=](int64_t) { return embd_mean; }) : nullptr, s.type);
  const LayerTensorSet& set = arch->tensors;
  if (arch->lm_head) {
    vec("output_norm.weight", s.dim, 1.0f, 0.1f);
    if (set.norm_bias) vec("output_norm.bias", s.dim, 0.0f, 0.1f);
    if (!arch->tied_output) matrix("output.weight", s.vocab, s.dim, 4.0f);
  }
  if (set.learned_positions) {
    matrix("position_embd.weight", s.ctx, s.dim, 1.0f);
    matrix("token_types.weight", 2, s.dim, 1.0f);
    vec("token_embd_norm.weight", s.dim, 1.0f, 0.1f);
    vec("token_embd_norm.bias", s.dim, 0.0f, 0.1f);
  }
  if (s.classifier_outputs > 0) {
    // A pooler whose tanh works in its curved part (inputs of about unit size), then the classifier.
    matrix("cls.weight", s.dim, s.dim, 1.0f);
    vec("cls.bias", s.dim, 0.0f, 0.1f);
    matrix("cls.output.weight", s.classifier_outputs, s.dim, 1.0f);
    vec("cls.output.bias", s.classifier_outputs, 0.0f, 0.1f);
  }
  if (s.rope_freqs) {
    // Llama 3.1's shape of factors: 1 for the fast pairs rising to 8 for the slowest.
    const int64_t half = s.rope_dims / 2;
    w.add_tensor("rope_freqs.weight", {half}, DType::F32, [=](uint8_t* dst) {
      auto* f = reinterpret_cast<float*>(dst);
      for (int64_t i = 0; i < half; ++i) f[i] = 1.0f + 7.0f * static_cast<float>(i) / static_cast<float>(std::max<int64_t>(1, half - 1));
    });
  }
  if (s.longrope) {
    // Phi-3's shapes: short factors near 1, long ones rising to 16 for the slowest pairs.
    const int64_t half = s.rope_dims / 2;
    for (const bool long_ctx : {true, false})
      w.add_tensor(long_ctx ? "rope_factors_long.weight" : "rope_factors_short.weight", {half}, DType::F32,
                   [=](uint8_t* dst) {
                     auto* f = reinterpret_cast<float*>(dst);
                     for (int64_t i = 0; i < half; ++i) {
                       const float t = static_cast<float>(i) / static_cast<float>(std::max<int64_t>(1, half - 1));
                       f[i] = long_ctx ? 1.0f + 15.0f * t * t : 1.0f + 0.5f * t;
                     }
                   });
  }
  for (int l = 0; l < s.layers; ++l) {
    const std::string b = fmt::format("blk.{}.", l);
    if (!set.no_pre_norms) {
      vec(b + "attn_norm.weight", s.dim, 1.0f, 0.1f);
      if (set.norm_bias) vec(b + "attn_norm.bias", s.dim, 0.0f, 0.1f);
    }
    if (set.fused_qkv) {
      matrix(b + "attn_qkv.weight", q_dim + 2 * kv_dim, s.dim, 1.0f);
    } else {
      matrix(b + "attn_q.weight", q_dim, s.dim, 1.0f);
      matrix(b + "attn_k.weight", kv_dim, s.dim, 1.0f);
      matrix(b + "attn_v.weight", kv_dim, s.dim, 1.0f);
    }
    matrix(b + "attn_output.weight", s.dim, q_dim, 1.0f);
    if (set.linear_bias) vec(b + "attn_output.bias", s.dim, 0.0f, 0.1f);
    if (set.qkv_bias) {
      vec(b + "attn_q.bias", q_dim, 0.0f, 0.1f);
      vec(b + "attn_k.bias", kv_dim, 0.0f, 0.1f);
      vec(b + "attn_v.bias", kv_dim, 0.0f, 0.1f);
    }
    if (set.qk_norm || set.qk_norm_full) {
      vec(b + "attn_q_norm.weight", set.qk_norm_full ? q_dim : s.head_dim, 1.0f, 0.1f);
      vec(b + "attn_k_norm.weight", set.qk_norm_full ? kv_dim : s.head_dim, 1.0f, 0.1f);
    }
    if (set.post_norms) {
      vec(b + "post_attention_norm.weight", s.dim, 1.0f, 0.1f);
      vec(b + "post_ffw_norm.weight", s.dim, 1.0f, 0.1f);
    }
    if (!set.no_pre_norms) {
      vec(b + "ffn_norm.weight", s.dim, 1.0f, 0.1f);
      if (set.norm_bias) vec(b + "ffn_norm.bias", s.dim, 0.0f, 0.1f);
    }
    if (set.residual_norms) {
      for (const char* norm : {"attn_output_norm", "layer_output_norm"}) {
        vec(b + norm + ".weight", s.dim, 1.0f, 0.1f);
        vec(b + norm + ".bias", s.dim, 0.0f, 0.1f);
      }
    }
    if (s.experts > 0) {
      const int64_t X = s.experts;
      // Expert e's router row leans toward the embeddings' offset by skew * (1 - e / (X - 1)) logits.
      const float skew = s.router_skew, dim = static_cast<float>(s.dim);
      tensor(b + "ffn_gate_inp.weight", X, s.dim, 1.0f, 0,
             skew > 0.0f ? std::function<float(int64_t)>([=](int64_t e) {
               return skew * 2.2f * (1.0f - static_cast<float>(e) / static_cast<float>(std::max<int64_t>(1, X - 1))) / dim;
             })
                         : nullptr,
             DType::F32);
      tensor(b + "ffn_gate_exps.weight", s.expert_ff, s.dim, 1.0f, X, nullptr, s.type);
      tensor(b + "ffn_up_exps.weight", s.expert_ff, s.dim, 1.0f, X, nullptr, s.type);
      tensor(b + "ffn_down_exps.weight", s.dim, s.expert_ff, 1.0f, X, nullptr, s.type);
      if (s.shared_expert_ff > 0) {
        vec(b + "ffn_gate_inp_shexp.weight", s.dim, 0.0f, 1.0f / std::sqrt(static_cast<float>(s.dim)));
        matrix(b + "ffn_gate_shexp.weight", s.shared_expert_ff, s.dim, 1.0f);
        matrix(b + "ffn_up_shexp.weight", s.shared_expert_ff, s.dim, 1.0f);
        matrix(b + "ffn_down_shexp.weight", s.dim, s.shared_expert_ff, 1.0f);
      }
      continue;
    }
    if (set.fused_gate_up) {
      matrix(b + "ffn_up.weight", 2 * static_cast<int64_t>(s.ff), s.dim, 1.0f);  // gate rows, then up rows
    } else {
      if (!set.ungated_ffn) matrix(b + "ffn_gate.weight", s.ff, s.dim, 1.0f);
      matrix(b + "ffn_up.weight", s.ff, s.dim, 1.0f);
      if (set.linear_bias) vec(b + "ffn_up.bias", s.ff, 0.0f, 0.1f);
    }
    matrix(b + "ffn_down.weight", s.dim, s.ff, 1.0f);
    if (set.linear_bias) vec(b + "ffn_down.bias", s.dim, 0.0f, 0.1f);
  }
  return w.write(path);
}

}  // namespace pagoda

#include "quant/type_policy.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>

#include "quant/w8a8.h"

namespace pagoda {
namespace {

// Everything quantize_row can write and the model loader can run, best first. W8A8
// (src/quant/w8a8.h) is Pagoda's own, target DType::I8.
constexpr std::array kTargets = {DType::F32,  DType::F16,  DType::BF16, DType::Q8_0, DType::Q6_K,
                                 DType::Q5_K, DType::Q5_1, DType::Q5_0, DType::Q4_K, DType::Q4_1,
                                 DType::Q4_0, DType::Q3_K, DType::Q2_K, DType::I8,
                                 DType::Q8_0_S24, DType::Q4_0_S24};
// llama.cpp has no file type for W8A8, so its files say MOSTLY_Q8_0, the nearest, and
// pagoda.weight_format names the format.
constexpr uint32_t kW8A8FileType = 7;

// Substrings of names llama.cpp never quantizes, whatever their shape.
constexpr std::string_view kNeverQuantized[] = {
    "_norm.weight",                                     // norms (2-D in some models)
    "ffn_gate_inp.weight", "ffn_gate_tid2eid.weight",   // MoE router, routing table
    "altup", "laurel", "per_layer_model_proj",          // Gemma 3n's small side paths
    "ssm_conv1d", "shortconv.conv.weight",              // small convolutions
    "indexer.k_proj.weight", "indexer.q_proj.weight",   // MiniMax's tiny indexer
    "time_mix_first.weight", "time_mix_w0.weight", "time_mix_w1.weight",  // RWKV's small
    "time_mix_w2.weight", "time_mix_v0.weight", "time_mix_v1.weight",     // 2-D tensors
    "time_mix_v2.weight", "time_mix_a0.weight", "time_mix_a1.weight",
    "time_mix_a2.weight", "time_mix_g1.weight", "time_mix_g2.weight",
    "time_mix_decay_w1.weight", "time_mix_decay_w2.weight", "time_mix_lerp_fused.weight",
    "attn_rel_b.weight",                                // T5 relative position bias
    ".position_embd", "sam.pos_embd", "sam.neck.", "sam.net_", ".rel_pos",  // vision
    ".patch_embd", ".patch_merger",
    "a.rvq.codebook", "mm.a.code_embd",                 // audio codebooks
};
// Whole names: learned position embeddings and BERT's token types (lookup tables).
constexpr std::string_view kNeverQuantizedNames[] = {"position_embd.weight", "token_types.weight"};

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

std::string target_names() {
  std::string out;
  for (DType t : kTargets) out += (out.empty() ? "" : ", ") + std::string(quantize_type_name(t));
  return out;
}

bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

}  // namespace

bool is_quantize_target(DType t) {
  return std::find(kTargets.begin(), kTargets.end(), t) != kTargets.end();
}

std::string_view quantize_type_name(DType t) { return t == DType::I8 ? kW8A8FormatName : dtype_name(t); }

Result<DType> parse_quantize_type(std::string_view name) {
  const std::string u = upper(name);
  if (u == kW8A8FormatName) return DType::I8;
  if (auto t = dtype_from_name(u); t && is_quantize_target(*t)) return *t;
  // llama.cpp's mixes (Q4_K_M, Q3_K_L, ...) pick other types for some tensors; Pagoda
  // writes one type (plus --keep rules), which is llama.cpp's _S / --pure file.
  if (u.size() > 2 && (u.ends_with("_S") || u.ends_with("_M") || u.ends_with("_L"))) {
    const std::string base = u.substr(0, u.size() - 2);
    if (auto t = dtype_from_name(base); t && is_quantize_target(*t))
      return error("unknown type '{}': llama.cpp's mixes are not offered; use {} (every weight matrix {}, "
                   "like llama-quantize --pure) with --keep rules for the tensors that need more bits",
                   name, base, base);
  }
  return error("unknown type '{}'; choose one of {}", name, target_names());
}

Result<KeepRule> parse_keep_rule(std::string_view spec) {
  const size_t eq = spec.find('=');
  if (eq == std::string_view::npos || eq == 0 || eq + 1 == spec.size())
    return error("--keep '{}': expected TYPE=REGEX, e.g. --keep q8_0='^output\\.weight|token_embd'", spec);
  auto type = parse_quantize_type(spec.substr(0, eq));
  if (!type) return error("--keep '{}': {}", spec, type.status().message());
  KeepRule rule;
  rule.type = *type;
  rule.pattern = std::string(spec.substr(eq + 1));
  try {
    rule.regex = std::regex(rule.pattern, std::regex::ECMAScript | std::regex::optimize);
  } catch (const std::regex_error& e) {
    return error("--keep '{}': '{}' is not a valid regular expression: {}", spec, rule.pattern, e.what());
  }
  return rule;
}

uint32_t llama_file_type(DType target) {
  if (target == DType::I8) return kW8A8FileType;
  // The "mostly T" file type of tensor/formats.inc (the _S variant for the K-quants).
  if (!is_quantize_target(target)) return 0;
  // A sparse file says its dense counterpart, the nearest llama.cpp knows (it refuses the
  // tensors' types all the same).
  return static_cast<uint32_t>(std::max(0, dtype_info(dense_counterpart(target)).file_type));
}

Result<DType> sparse_counterpart(DType dense) {
  switch (dense) {
    case DType::Q8_0:
    case DType::Q8_0_S24: return DType::Q8_0_S24;
    case DType::Q4_0:
    case DType::Q4_0_S24: return DType::Q4_0_S24;
    default:
      return error("--sparsity 2:4 has formats for Q8_0 (Q8_0_S24) and Q4_0 (Q4_0_S24); {} has no sparse counterpart",
                   quantize_type_name(dense));
  }
}

DType dense_counterpart(DType t) {
  if (t == DType::Q8_0_S24) return DType::Q8_0;
  if (t == DType::Q4_0_S24) return DType::Q4_0;
  return t;
}

KeepRule sparse_keeps_dense_rule(DType sparse) {
  KeepRule rule;
  rule.type = dense_counterpart(sparse);
  rule.pattern = "^(token_embd|output)\\.weight$";
  rule.regex = std::regex(rule.pattern, std::regex::ECMAScript | std::regex::optimize);
  return rule;
}

std::string quantize_type_names() { return target_names(); }

bool tensor_allows_quantization(std::string_view name, std::span<const int64_t> shape) {
  // ggml counts dimensions up to the last one larger than 1: a [4096, 1] tensor is 1-D.
  size_t dims = shape.size();
  while (dims > 1 && shape[dims - 1] == 1) --dims;
  if (dims < 2) return false;
  if (!name.ends_with("weight")) return false;
  for (std::string_view s : kNeverQuantized)
    if (contains(name, s)) return false;
  for (std::string_view s : kNeverQuantizedNames)
    if (name == s) return false;
  return true;
}

DType fallback_type(DType wanted, int64_t row_len) {
  if (wanted == DType::I8) return row_len <= kW8A8MaxCols ? wanted : DType::F16;
  const int64_t block = dtype_info(wanted).block_size;
  if (row_len % block == 0) return wanted;
  DType narrower = wanted;
  switch (wanted) {
    case DType::Q2_K:
    case DType::Q3_K: narrower = DType::Q4_0; break;
    case DType::Q4_K: narrower = DType::Q5_0; break;
    case DType::Q5_K: narrower = DType::Q5_1; break;
    case DType::Q6_K: narrower = DType::Q8_0; break;
    case DType::Q8_0_S24:
    case DType::Q4_0_S24: narrower = dense_counterpart(wanted); break;
    default: break;  // already a 32-value format
  }
  return row_len % dtype_info(narrower).block_size == 0 ? narrower : DType::F16;
}

TensorTypeChoice TypePolicy::choose(std::string_view name, std::span<const int64_t> shape, DType source) const {
  TensorTypeChoice c;
  if (shape.empty() || !tensor_allows_quantization(name, shape)) {
    c.type = c.wanted = source;
    return c;
  }
  c.quantizable = true;
  c.wanted = target_;
  const std::string n(name);
  for (size_t i = 0; i < keep_.size(); ++i) {
    if (std::regex_search(n, keep_[i].regex)) {
      c.wanted = keep_[i].type;
      c.keep_rule = static_cast<int>(i);
      break;
    }
  }
  c.type = fallback_type(c.wanted, shape[0]);
  return c;
}

}  // namespace pagoda

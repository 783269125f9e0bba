// The registered architectures. Adding one: its file (model/arch_<name>.cpp, defining
// kArch<Name>) and one line in each list below.
#include <fmt/format.h>

#include <array>
#include <cmath>

#include "gguf/gguf_file.h"
#include "model/arch_spec.h"

namespace pagoda {

extern const ArchSpec kArchLlama;
extern const ArchSpec kArchQwen2;
extern const ArchSpec kArchGemma3;
extern const ArchSpec kArchQwen3;
extern const ArchSpec kArchGranite;
extern const ArchSpec kArchSmollm3;
extern const ArchSpec kArchGemma2;
extern const ArchSpec kArchPhi3;
extern const ArchSpec kArchStarcoder2;
extern const ArchSpec kArchOlmo2;
extern const ArchSpec kArchQwen2Moe;
extern const ArchSpec kArchQwen3Moe;
extern const ArchSpec kArchOlmoe;
extern const ArchSpec kArchBert;

namespace {
const std::array<const ArchSpec*, 14> kArchs = {&kArchLlama,     &kArchQwen2,    &kArchGemma3,   &kArchQwen3,
                                                 &kArchGranite,   &kArchSmollm3,  &kArchGemma2,   &kArchPhi3,
                                                 &kArchStarcoder2, &kArchOlmo2,   &kArchQwen2Moe, &kArchQwen3Moe,
                                                 &kArchOlmoe,     &kArchBert};
}  // namespace

std::span<const ArchSpec* const> all_archs() { return kArchs; }

const ArchSpec* find_arch(std::string_view name) {
  for (const ArchSpec* a : kArchs)
    if (name == a->name) return a;
  return nullptr;
}

std::string arch_names() {
  std::string out;
  for (const ArchSpec* a : kArchs) out += fmt::format("{}{}", out.empty() ? "" : ", ", a->name);
  return out;
}

std::string moe_arch_names() {
  std::string out;
  for (const ArchSpec* a : kArchs)
    if (a->moe.supported) out += fmt::format("{}{}", out.empty() ? "" : ", ", a->name);
  return out;
}

Result<float> required_positive(const GgufFile& f, const std::string& key) {
  if (f.find(key) == nullptr) return error("{}: missing metadata key {}", f.path(), key);
  const auto x = f.get_float(key);
  if (!x || !std::isfinite(*x) || *x <= 0.0) return error("{}: metadata {} must be a positive number", f.path(), key);
  return static_cast<float>(*x);
}

void configure_plain_decoder(ModelConfig& c, RopeLayout layout) {
  c.rope.layout = layout;
  c.act = FfnActivation::kSilu;
  c.rope_local = c.rope;
}

const std::vector<AwqGroupSpec>& dense_awq_groups() {
  static const std::vector<AwqGroupSpec> groups = {
      {LinearInput::kAttention, {"attn_q", "attn_k", "attn_v"}, "attn_norm", false, "q,k,v"},
      {LinearInput::kFfn, {"ffn_gate", "ffn_up"}, "ffn_norm", false, "gate,up"},
      {LinearInput::kFfnDown, {"ffn_down"}, "ffn_up", true, "down"},
  };
  return groups;
}

std::vector<AwqGroupSpec> awq_groups(const ArchSpec& arch, int64_t n_head, int64_t n_head_kv) {
  std::vector<AwqGroupSpec> groups = arch.awq_groups();
  // An MoE layer's FFN is experts, which AWQ does not scale (docs/moe.md#quantization).
  if (arch.moe.required)
    std::erase_if(groups, [](const AwqGroupSpec& g) { return g.input == LinearInput::kFfn || g.input == LinearInput::kFfnDown; });
  // The attention output's channels are V's rows only when every query head has its own
  // KV head; with grouped KV heads a V row feeds several output channels. (A fused QKV
  // matrix has no V tensor of its own to fold into.)
  if (n_head > 0 && n_head == n_head_kv && !arch.tensors.fused_qkv)
    groups.push_back({LinearInput::kAttentionOutput, {"attn_output"}, "attn_v", true, "o"});
  return groups;
}

}  // namespace pagoda

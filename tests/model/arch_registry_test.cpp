// Every registered architecture (model/arch_spec.h) works end to end from its spec alone:
// the random-model writer emits what its spec says, the loader binds exactly the optional
// tensors the spec names, and AWQ's groups name tensors that exist. A new architecture is
// covered here by being registered.
#include "model/arch_spec.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "model/model.h"
#include "model/random_model.h"

namespace pagoda {
namespace {

std::vector<std::string> registered_names() {
  std::vector<std::string> names;
  for (const ArchSpec* a : all_archs()) names.emplace_back(a->name);
  return names;
}

TEST(ArchRegistry, NamesAreUniqueAndFound) {
  std::set<std::string> seen;
  for (const ArchSpec* a : all_archs()) {
    EXPECT_TRUE(seen.insert(a->name).second) << a->name << " is registered twice";
    EXPECT_EQ(find_arch(a->name), a);
    EXPECT_NE(a->configure, nullptr);
    EXPECT_NE(a->awq_groups, nullptr);
    EXPECT_NE(a->chat_template, nullptr);
  }
  EXPECT_EQ(find_arch("no-such-arch"), nullptr);
  EXPECT_NE(arch_names().find("llama"), std::string::npos);
}

class ArchSpecTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ArchSpecTest, RandomModelLoadsWithExactlyTheSpecsTensors) {
  const ArchSpec* spec = find_arch(GetParam());
  ASSERT_NE(spec, nullptr);
  const auto path = std::filesystem::temp_directory_path() / ("pagoda_arch_registry_" + GetParam() + ".gguf");
  RandomModelSpec s;
  s.arch = GetParam();
  s.layers = 6;
  s.sliding_window = 4;
  if (GetParam() == "olmoe") s.kv_heads = s.heads;  // its K norm spans n_embd, as llama.cpp sizes it
  ASSERT_TRUE(write_random_model(s, path.string()).is_ok());
  auto file = GgufFile::open(path.string());
  ASSERT_TRUE(file.is_ok()) << file.status().message();
  ThreadPool pool(1);
  auto model = Model::load(*file, pool, false);
  ASSERT_TRUE(model.is_ok()) << model.status().message();
  const Model& m = **model;
  EXPECT_EQ(m.config().arch, spec);
  EXPECT_EQ(m.config().arch_name, spec->name);
  const LayerTensorSet& set = spec->tensors;
  EXPECT_FALSE(set.qk_norm && set.qk_norm_full);
  for (const LayerWeights& L : m.weights().layers) {
    EXPECT_EQ(L.bq != nullptr, set.qkv_bias);
    EXPECT_EQ(L.q_norm != nullptr, set.qk_norm || set.qk_norm_full);
    EXPECT_EQ(L.k_norm != nullptr, set.qk_norm || set.qk_norm_full);
    EXPECT_EQ(L.post_attn_norm != nullptr, set.post_norms);
    EXPECT_EQ(L.post_ffw_norm != nullptr, set.post_norms);
    EXPECT_EQ(L.attn_norm != nullptr, !set.no_pre_norms);
    EXPECT_EQ(L.ffn_norm != nullptr, !set.no_pre_norms);
    EXPECT_EQ(L.attn_norm_b != nullptr, set.norm_bias && !set.no_pre_norms);
    EXPECT_EQ(L.ffn_norm_b != nullptr, set.norm_bias && !set.no_pre_norms);
    EXPECT_EQ(L.bo != nullptr, set.linear_bias);
    EXPECT_EQ(L.b_up != nullptr, set.linear_bias);
    EXPECT_EQ(L.b_down != nullptr, set.linear_bias);
    EXPECT_EQ(L.b_gate, nullptr);
    EXPECT_EQ(L.attn_out_norm != nullptr && L.attn_out_norm_b != nullptr, set.residual_norms);
    EXPECT_EQ(L.layer_out_norm != nullptr && L.layer_out_norm_b != nullptr, set.residual_norms);
    // An MoE layer (every layer of an architecture that requires experts) has experts in
    // place of the dense FFN, and a shared expert when the spec says so.
    const ModelConfig& c = m.config();
    EXPECT_EQ(c.is_moe(), spec->moe.required);
    if (c.is_moe()) {
      EXPECT_TRUE(L.gate.empty() && L.up.empty() && L.down.empty());
      EXPECT_EQ(L.router.rows, c.n_expert);
      EXPECT_EQ(L.gate_exps.size(), static_cast<size_t>(c.n_expert));
      EXPECT_EQ(L.down_exps.size(), static_cast<size_t>(c.n_expert));
      EXPECT_EQ(L.shexp_gate != nullptr, spec->moe.shared_expert);
      EXPECT_EQ(!L.gate_shexp.empty(), spec->moe.shared_expert);
    } else {
      EXPECT_EQ(L.gate.empty(), set.ungated_ffn);
    }
  }
  EXPECT_EQ(m.weights().output_norm_b != nullptr, set.norm_bias && spec->lm_head);
  EXPECT_EQ(m.weights().output.empty(), !spec->lm_head);
  EXPECT_EQ(m.config().has_lm_head, spec->lm_head);
  if (spec->lm_head) {
    EXPECT_EQ(m.weights().output.data == m.weights().tok_embd.data, spec->tied_output);
  }
  EXPECT_EQ(!m.weights().pos_embd.empty() && m.weights().type_embd != nullptr && m.weights().embd_norm_b != nullptr,
            set.learned_positions);

  // AWQ's groups name tensors the file has, and fold into ones it has.
  for (const AwqGroupSpec& g : awq_groups(*spec, m.config().n_head, m.config().n_head_kv)) {
    EXPECT_FALSE(g.mats.empty());
    for (const char* mat : g.mats)
      EXPECT_NE(file->find_tensor(std::string("blk.0.") + mat + ".weight"), nullptr) << g.label << ": " << mat;
    EXPECT_NE(file->find_tensor(std::string("blk.0.") + g.fold + ".weight"), nullptr) << g.label << ": " << g.fold;
  }

  KvCache kv = m.make_cache(16);
  std::vector<float> logits(m.config().n_vocab);
  const std::vector<int32_t> prompt = {1, 300, 301, 45};
  if (!spec->lm_head) {
    // An encoder runs (its hidden states are what it gives) but has no logits to give.
    ASSERT_TRUE((*model)->forward(prompt, 0, kv, nullptr).is_ok());
    EXPECT_FALSE((*model)->forward(prompt, 0, kv, logits.data()).is_ok());
    std::filesystem::remove(path);
    return;
  }
  ASSERT_TRUE((*model)->forward(prompt, 0, kv, logits.data()).is_ok());
  for (float v : logits) ASSERT_TRUE(std::isfinite(v));
  std::filesystem::remove(path);
}

TEST(ArchSpec, AttentionOutputGroupOnlyWithoutGroupedHeads) {
  const ArchSpec* llama = find_arch("llama");
  ASSERT_NE(llama, nullptr);
  auto has_o = [](const std::vector<AwqGroupSpec>& gs) {
    for (const AwqGroupSpec& g : gs)
      if (g.input == LinearInput::kAttentionOutput) return true;
    return false;
  };
  EXPECT_TRUE(has_o(awq_groups(*llama, 8, 8)));
  EXPECT_FALSE(has_o(awq_groups(*llama, 8, 2)));
}

TEST(ArchSpec, UnregisteredArchitectureIsRefusedByTheWriter) {
  RandomModelSpec s;
  s.arch = "no-such-arch";
  const Status st = write_random_model(s, (std::filesystem::temp_directory_path() / "pagoda_no_arch.gguf").string());
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("not registered"), std::string::npos) << st.message();
}

INSTANTIATE_TEST_SUITE_P(Registered, ArchSpecTest, ::testing::ValuesIn(registered_names()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace pagoda

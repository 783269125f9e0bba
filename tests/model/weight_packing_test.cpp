// Load-time repacking (model/weight_packing.h) on generated models: which matrices get
// panels, that a tied embedding table keeps its rows for lookups while the output
// projection reads panels, that logits match the row-major model, and that a decode step
// gives the same bits as a prefill of the same position when every matrix is packed.
#include "model/weight_packing.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <vector>

#include "gguf/gguf_file.h"
#include "kernels/matmul/packed_weights.h"
#include "model/model.h"
#include "model/random_model.h"

namespace pagoda {
namespace {

std::string model_file(const std::string& arch, DType type, int32_t dim, int32_t ff) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("pagoda_packing_" + arch + "_" + std::string(dtype_name(type)) + ".gguf");
  RandomModelSpec s;
  s.arch = arch;
  s.type = type;
  s.dim = dim;
  s.ff = ff;
  s.heads = 4;
  s.kv_heads = 2;
  s.layers = 2;
  EXPECT_TRUE(write_random_model(s, path.string()).is_ok());
  return path.string();
}

struct Case {
  std::string arch;
  DType type;
};

class WeightPackingTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    if (packed_kernels(GetParam().type) == nullptr)
      GTEST_SKIP() << dtype_name(GetParam().type)
                   << " matrices are not repacked here (no AVX-512 VNNI, PAGODA_CPU or PAGODA_REPACK=0)";
  }
};

TEST_P(WeightPackingTest, PacksEveryMatrixAndKeepsTheEmbeddingRows) {
  const auto [arch, type] = GetParam();
  auto file = GgufFile::open(model_file(arch, type, 256, 512));
  ASSERT_TRUE(file.is_ok()) << file.status().message();
  ThreadPool pool(2);
  auto packed = Model::load(*file, pool);
  ASSERT_TRUE(packed.is_ok()) << packed.status().message();
  const ModelWeights& w = (*packed)->weights();
  for (const LayerWeights& L : w.layers)
    for (const WeightView* v : {&L.wq, &L.wk, &L.wv, &L.wo, &L.gate, &L.up, &L.down})
      EXPECT_NE(v->packed, nullptr);
  EXPECT_NE(w.output.packed, nullptr);
  EXPECT_EQ(w.tok_embd.packed, nullptr) << "lookups read rows";
  EXPECT_NE(w.tok_embd.data, nullptr);
  auto plain = Model::load(*file, pool, /*repack=*/false);
  ASSERT_TRUE(plain.is_ok());
  EXPECT_EQ((*plain)->weights().output.packed, nullptr);
}

TEST_P(WeightPackingTest, LogitsMatchTheRowMajorModel) {
  const auto [arch, type] = GetParam();
  auto file = GgufFile::open(model_file(arch, type, 256, 512));
  ASSERT_TRUE(file.is_ok());
  ThreadPool pool(2);
  auto packed = Model::load(*file, pool);
  auto plain = Model::load(*file, pool, /*repack=*/false);
  ASSERT_TRUE(packed.is_ok() && plain.is_ok());
  const int32_t V = (*packed)->config().n_vocab;
  const std::vector<int32_t> prompt = {1, 30, 31, 45, 77, 99, 12, 400, 260, 261};
  const int64_t n = static_cast<int64_t>(prompt.size());
  std::vector<float> a(n * V), b(n * V);
  KvCache ka = (*packed)->make_cache(64), kb = (*plain)->make_cache(64);
  ASSERT_TRUE((*packed)->forward(prompt, 0, ka, a.data(), true).is_ok());
  ASSERT_TRUE((*plain)->forward(prompt, 0, kb, b.data(), true).is_ok());
  float scale = 1.0f;
  for (float v : b) scale = std::max(scale, std::fabs(v));
  // Same values summed in another order (and activations re-rounded to FP16 in the KV).
  for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 2e-3 * scale) << "logit " << i;
}

// The packed GEMV and tile compute an output identically, so with every matrix packed a
// token decoded alone gets the bits it gets inside a prefill.
TEST_P(WeightPackingTest, DecodeEqualsPrefillBitForBit) {
  const auto [arch, type] = GetParam();
  auto file = GgufFile::open(model_file(arch, type, 256, 512));
  ASSERT_TRUE(file.is_ok());
  ThreadPool pool(2);
  auto model = Model::load(*file, pool);
  ASSERT_TRUE(model.is_ok());
  const int32_t V = (*model)->config().n_vocab;
  const std::vector<int32_t> prompt = {1, 30, 31, 45, 77, 99};
  const int64_t n = static_cast<int64_t>(prompt.size());
  std::vector<float> all(n * V), last(V);
  KvCache k1 = (*model)->make_cache(64), k2 = (*model)->make_cache(64);
  ASSERT_TRUE((*model)->forward(prompt, 0, k1, all.data(), true).is_ok());
  ASSERT_TRUE((*model)->forward(std::span<const int32_t>(prompt).first(n - 1), 0, k2, last.data()).is_ok());
  ASSERT_TRUE(
      (*model)->forward(std::span<const int32_t>(&prompt[n - 1], 1), static_cast<int32_t>(n - 1), k2, last.data())
          .is_ok());
  for (int32_t v = 0; v < V; ++v) ASSERT_EQ(last[v], all[(n - 1) * V + v]) << "logit " << v;
}

INSTANTIATE_TEST_SUITE_P(Formats, WeightPackingTest,
                         ::testing::Values(Case{"llama", DType::Q4_0}, Case{"llama", DType::Q5_0}, Case{"llama", DType::Q8_0},
                                           Case{"llama", DType::Q4_K}, Case{"gemma3", DType::Q8_0}),
                         [](const auto& info) {
                           return info.param.arch + "_" + std::string(dtype_name(info.param.type));
                         });

}  // namespace
}  // namespace pagoda

#include "model/model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "gguf/gguf_file.h"
#include "model/random_model.h"

namespace pagoda {
namespace {

std::string tiny_model(const std::string& arch, DType type) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("pagoda_forward_" + arch + "_" + std::string(dtype_name(type)) + ".gguf");
  RandomModelSpec s;
  s.arch = arch;
  s.type = type;
  s.layers = arch == "gemma3" ? 6 : 2;  // gemma3: five sliding-window layers and a global one
  s.sliding_window = 4;
  EXPECT_TRUE(write_random_model(s, path.string()).is_ok());
  return path.string();
}

class ForwardTest : public ::testing::TestWithParam<std::string> {};

// Prefill of the whole prompt in one pass and token-by-token decoding must produce the
// same logits: the KV cache holds exactly what recomputation would.
TEST_P(ForwardTest, IncrementalDecodeMatchesBatchedPrefill) {
  const std::string path = tiny_model(GetParam(), DType::F32);
  auto file = GgufFile::open(path);
  ASSERT_TRUE(file.is_ok()) << file.status().message();
  ThreadPool pool(2);
  auto model = Model::load(*file, pool);
  ASSERT_TRUE(model.is_ok()) << model.status().message();
  const int32_t V = (*model)->config().n_vocab;
  const std::vector<int32_t> prompt = {1, 300, 301, 45, 77, 99, 12, 400, 260, 261};
  const int64_t n = static_cast<int64_t>(prompt.size());

  KvCache kv_all = (*model)->make_cache(64);
  std::vector<float> all(n * V);
  ASSERT_TRUE((*model)->forward(prompt, 0, kv_all, all.data(), true).is_ok());

  KvCache kv_inc = (*model)->make_cache(64);
  std::vector<float> one(V);
  for (int64_t t = 0; t < n; ++t) {
    ASSERT_TRUE((*model)->forward(std::span<const int32_t>(&prompt[t], 1), static_cast<int32_t>(t), kv_inc,
                                  one.data())
                    .is_ok());
    // Decode runs the GEMV kernels and prefill the tiled ones: the same arithmetic summed
    // in another order, and a last-bit difference can round a K/V value to the other
    // neighbouring FP16 (2^-11 relative). A wrong cache gives differences of order one.
    float scale = 1.0f;
    for (int32_t v = 0; v < V; ++v) scale = std::max(scale, std::fabs(all[t * V + v]));
    for (int32_t v = 0; v < V; ++v) ASSERT_NEAR(one[v], all[t * V + v], 2e-4 * scale) << "position " << t;
  }
}

// The token-wise passes between the matrix multiplications split across the pool once a
// batch is wide enough; every token is computed by the same code wherever it lands, so
// the logits of a long prompt are the same bits on one thread and on three.
TEST_P(ForwardTest, LogitsAreTheSameBitsOnAnyNumberOfThreads) {
  const std::string path = tiny_model(GetParam(), DType::F32);
  auto file = GgufFile::open(path);
  ASSERT_TRUE(file.is_ok()) << file.status().message();
  std::vector<int32_t> prompt;
  for (int32_t i = 0; i < 300; ++i) prompt.push_back(1 + (i * 37) % 500);
  std::vector<std::vector<float>> logits;
  for (int threads : {1, 3}) {
    ThreadPool pool(threads);
    auto model = Model::load(*file, pool);
    ASSERT_TRUE(model.is_ok()) << model.status().message();
    KvCache kv = (*model)->make_cache(512);
    logits.emplace_back(prompt.size() * (*model)->config().n_vocab);
    ASSERT_TRUE((*model)->forward(prompt, 0, kv, logits.back().data(), true).is_ok());
  }
  ASSERT_EQ(logits[0].size(), logits[1].size());
  for (size_t i = 0; i < logits[0].size(); ++i) ASSERT_EQ(logits[0][i], logits[1][i]) << "logit " << i;
}

TEST_P(ForwardTest, RejectsTokensOutsideVocabularyAndContextOverflow) {
  const std::string path = tiny_model(GetParam(), DType::F32);
  auto file = GgufFile::open(path);
  ASSERT_TRUE(file.is_ok());
  ThreadPool pool(1);
  auto model = Model::load(*file, pool);
  ASSERT_TRUE(model.is_ok());
  KvCache kv = (*model)->make_cache(8);
  std::vector<float> logits((*model)->config().n_vocab);
  const std::vector<int32_t> bad = {1, 100000};
  Status st = (*model)->forward(bad, 0, kv, logits.data());
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("outside the vocabulary"), std::string::npos) << st.message();
  const std::vector<int32_t> many(9, 5);
  st = (*model)->forward(many, 0, kv, logits.data());
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("do not fit"), std::string::npos) << st.message();
}

INSTANTIATE_TEST_SUITE_P(Archs, ForwardTest, ::testing::Values("llama", "qwen2", "gemma3"));

TEST(ModelLoad, MissingTensorIsAClearError) {
  // A gemma3 file read as if it were llama is fine, but a file missing a required tensor
  // must name it: write a model, then corrupt a tensor name in place.
  const std::string path = tiny_model("llama", DType::F32);
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  const std::string needle = "blk.1.ffn_up.weight";
  const size_t at = bytes.find(needle);
  ASSERT_NE(at, std::string::npos);
  bytes[at + 6] = 'X';  // "blk.1.Xfn_up.weight"
  const std::string broken = path + ".broken.gguf";
  {
    std::ofstream out(broken, std::ios::binary);
    out << bytes;
  }
  auto file = GgufFile::open(broken);
  ASSERT_TRUE(file.is_ok()) << file.status().message();
  ThreadPool pool(1);
  auto model = Model::load(*file, pool);
  ASSERT_FALSE(model.is_ok());
  EXPECT_NE(model.status().message().find("missing tensor blk.1.ffn_up.weight"), std::string::npos)
      << model.status().message();
}

}  // namespace
}  // namespace pagoda

// The model probe runs the engine's forward over a zero-weight copy of a model's shape:
// the copy has the model's layers (or the first ones that fit), the key names the shape
// and not the values, and the step it times is a real one (positive, prefill longer than
// a decode step).
#include "plan/model_probe.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "gguf/gguf_file.h"
#include "model/random_model.h"
#include "plan_test_util.h"

namespace pagoda {
namespace {

using plan_test::write_model;

RandomModelSpec spec(const char* arch, uint64_t seed = 42) {
  RandomModelSpec s;
  s.arch = arch;
  s.type = DType::Q8_0;
  s.dim = 256;
  s.ff = 512;
  s.vocab = 1024;
  s.layers = 6;
  s.seed = seed;
  return s;
}

TEST(ModelProbe, KeyNamesTheShapeNotTheValues) {
  auto a = GgufFile::open(write_model("key-a.gguf", spec("llama", 1)));
  auto b = GgufFile::open(write_model("key-b.gguf", spec("llama", 2)));
  RandomModelSpec wider = spec("llama", 1);
  wider.ff = 768;
  auto c = GgufFile::open(write_model("key-c.gguf", wider));
  ASSERT_TRUE(a.is_ok() && b.is_ok() && c.is_ok());
  EXPECT_EQ(model_shape_key(*a), model_shape_key(*b));
  EXPECT_NE(model_shape_key(*a), model_shape_key(*c));
}

TEST(ModelProbe, TimesTheWholeModelOrTheLayersThatFit) {
  // Gemma 3: sliding-window layers and per-layer patterns survive the cut.
  for (const char* arch : {"llama", "gemma3", "qwen2"}) {
    auto f = GgufFile::open(write_model(std::string("probe-") + arch + ".gguf", spec(arch)));
    ASSERT_TRUE(f.is_ok()) << f.status().message();
    ThreadPool pool(2);
    const std::string scratch = ::testing::TempDir();
    auto whole = time_model_shape(*f, KvType::kF16, 1e-5, size_t{1} << 30, scratch, pool);
    ASSERT_TRUE(whole.is_ok()) << arch << ": " << whole.status().message();
    EXPECT_EQ(whole->layers, 6) << arch;
    EXPECT_EQ(whole->n_layer, 6) << arch;
    EXPECT_EQ(whole->key, model_shape_key(*f));
    EXPECT_GT(whole->decode_s, 0) << arch;
    EXPECT_GT(whole->prefill_s, whole->decode_s) << arch;
    EXPECT_EQ(whole->prefill_tokens, 512);
    // Room for the tensors outside the layers and about two layers.
    size_t outside = 0, layer0 = 0;
    for (const GgufTensor& t : f->tensors()) {
      if (t.name.rfind("blk.", 0) != 0) outside += t.nbytes;
      else if (t.name.rfind("blk.0.", 0) == 0) layer0 += t.nbytes;
    }
    auto part = time_model_shape(*f, KvType::kF16, 1e-5, outside + 2 * layer0 + layer0 / 2, scratch, pool);
    ASSERT_TRUE(part.is_ok()) << arch << ": " << part.status().message();
    EXPECT_EQ(part->layers, 2) << arch;
    EXPECT_EQ(part->n_layer, 6) << arch;
    // The copy is removed once timed.
    for (const auto& e : std::filesystem::directory_iterator(scratch))
      EXPECT_EQ(e.path().filename().string().rfind("shape-probe-", 0), std::string::npos) << e.path();
  }
}

TEST(ModelProbe, AnEncoderIsNotTimed) {
  RandomModelSpec s = spec("bert");
  s.type = DType::F32;
  auto f = GgufFile::open(write_model("probe-bert.gguf", s));
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  ThreadPool pool(2);
  auto t = time_model_shape(*f, KvType::kF16, 0, size_t{1} << 30, ::testing::TempDir(), pool);
  EXPECT_FALSE(t.is_ok());
}

}  // namespace
}  // namespace pagoda

// W8A8 models (src/quant/w8a8.h) through the loader: a generated file binds every matrix
// with its row scales and runs; a file whose scale tensor is missing, of the wrong type
// or shape fails to load with a message naming the tensor, never a crash.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "model/model.h"
#include "model/random_model.h"
#include "quant/w8a8.h"

namespace pagoda {
namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("pagoda_w8a8_" + name + ".gguf")).string();
}

std::string generate(DType type, const std::string& name) {
  RandomModelSpec s;
  s.type = type;
  s.dim = 96;  // rows of 96 and 192: odd multiples of 32
  s.ff = 192;
  s.heads = 3;
  s.kv_heads = 1;
  const std::string path = temp_path(name);
  const Status st = write_random_model(s, path);
  EXPECT_TRUE(st.is_ok()) << st.message();
  return path;
}

TEST(W8A8Model, GeneratedFileBindsScalesAndRunsCloseToItsF32Source) {
  const std::string w8 = generate(DType::I8, "model"), f32 = generate(DType::F32, "source");
  auto file = GgufFile::open(w8);
  ASSERT_TRUE(file.is_ok()) << file.status().message();
  const GgufValue* key = file->find(kW8A8FormatKey);
  ASSERT_NE(key, nullptr);
  ASSERT_NE(key->as_string(), nullptr);
  EXPECT_EQ(*key->as_string(), kW8A8FormatName);
  ThreadPool pool(2);
  auto model = Model::load(*file, pool);
  ASSERT_TRUE(model.is_ok()) << model.status().message();
  const ModelWeights& w = (*model)->weights();
  for (const WeightView* v : {&w.tok_embd, &w.output, &w.layers[0].wq, &w.layers[1].down}) {
    EXPECT_EQ(v->type, DType::I8);
    EXPECT_NE(v->row_scales, nullptr);
    EXPECT_EQ(v->row_stride, static_cast<size_t>(v->cols));
  }
  auto ffile = GgufFile::open(f32);
  ASSERT_TRUE(ffile.is_ok());
  auto fmodel = Model::load(*ffile, pool);
  ASSERT_TRUE(fmodel.is_ok());
  // Same seed, same values before rounding: the logits of a 9-token prompt stay within a
  // few percent (per-row weights and per-token activations each round to 1/254 of their
  // largest value; tests/e2e/test_w8a8.py derives the bound).
  const std::vector<int32_t> prompt = {1, 300, 301, 45, 77, 99, 12, 400, 260};
  const int64_t n = static_cast<int64_t>(prompt.size());
  const int32_t V = (*model)->config().n_vocab;
  std::vector<float> a(n * V), b(n * V);
  KvCache ka = (*model)->make_cache(16), kb = (*fmodel)->make_cache(16);
  ASSERT_TRUE((*model)->forward(prompt, 0, ka, a.data(), true).is_ok());
  ASSERT_TRUE((*fmodel)->forward(prompt, 0, kb, b.data(), true).is_ok());
  for (int64_t t = 0; t < n; ++t) {
    double num = 0, den = 0;
    for (int32_t v = 0; v < V; ++v) {
      const double d = static_cast<double>(a[t * V + v]) - b[t * V + v];
      num += d * d;
      den += static_cast<double>(b[t * V + v]) * b[t * V + v];
    }
    EXPECT_LT(std::sqrt(num / den), 0.05) << "position " << t;
  }
}

// Rewrites `src` with its tensors passed through `edit`, which may drop one (returns
// false) or change its type, shape and bytes.
using TensorEdit = std::function<bool(std::string& name, std::vector<int64_t>& shape, DType& type,
                                      std::vector<uint8_t>& bytes)>;
std::string rewrite(const std::string& src, const std::string& name, const TensorEdit& edit) {
  auto f = GgufFile::open(src);
  EXPECT_TRUE(f.is_ok());
  GgufWriter w(f->alignment());
  for (const auto& [k, v] : f->metadata())
    if (k != "general.alignment") w.set(k, v);
  for (const GgufTensor& t : f->tensors()) {
    std::string tn = t.name;
    std::vector<int64_t> shape = t.shape;
    DType type = t.type;
    std::vector<uint8_t> bytes(t.data, t.data + t.nbytes);
    if (!edit(tn, shape, type, bytes)) continue;
    w.add_tensor_bytes(tn, shape, type, bytes.data(), bytes.size());
  }
  const std::string out = temp_path(name);
  const Status st = w.write(out);
  EXPECT_TRUE(st.is_ok()) << st.message();
  return out;
}

std::string load_error(const std::string& path) {
  auto f = GgufFile::open(path);
  if (!f) return "open: " + f.status().message();
  ThreadPool pool(1);
  auto m = Model::load(*f, pool);
  return m ? std::string() : m.status().message();
}

TEST(W8A8Model, ScaleTensorProblemsAreClearLoadErrors) {
  const std::string src = generate(DType::I8, "edit_src");
  const std::string target = "blk.1.ffn_up.weight.scale";
  const std::string missing = rewrite(src, "missing", [&](std::string& n, auto&, DType&, auto&) { return n != target; });
  std::string msg = load_error(missing);
  EXPECT_NE(msg.find("blk.1.ffn_up.weight is I8"), std::string::npos) << msg;
  EXPECT_NE(msg.find(target + " are missing"), std::string::npos) << msg;

  const std::string short_scales = rewrite(src, "short", [&](std::string& n, std::vector<int64_t>& shape, DType&,
                                                             std::vector<uint8_t>& bytes) {
    if (n == target) {
      shape[0] -= 1;
      bytes.resize(bytes.size() - 4);
    }
    return true;
  });
  msg = load_error(short_scales);
  EXPECT_NE(msg.find("W8A8 scale tensor " + target + " is F32 [191], expected F32 [192]"), std::string::npos) << msg;

  const std::string f16_scales = rewrite(src, "f16", [&](std::string& n, std::vector<int64_t>&, DType& type,
                                                         std::vector<uint8_t>& bytes) {
    if (n == target) {
      type = DType::F16;
      bytes.resize(bytes.size() / 2);
    }
    return true;
  });
  msg = load_error(f16_scales);
  EXPECT_NE(msg.find("is F16 [192], expected F32 [192]"), std::string::npos) << msg;

  const std::string matrix_scales = rewrite(src, "matrix", [&](std::string& n, std::vector<int64_t>& shape, DType&,
                                                               std::vector<uint8_t>&) {
    if (n == target) shape = {96, 2};
    return true;
  });
  msg = load_error(matrix_scales);
  EXPECT_NE(msg.find("is F32 [96, 2], expected F32 [192]"), std::string::npos) << msg;

  EXPECT_EQ(load_error(src), "");
}

}  // namespace
}  // namespace pagoda

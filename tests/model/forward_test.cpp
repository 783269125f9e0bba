#include "model/model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
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
  // gemma3: five sliding-window layers and a global one; gemma2: one of each.
  s.layers = arch == "gemma3" ? 6 : 2;
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

INSTANTIATE_TEST_SUITE_P(Archs, ForwardTest, ::testing::Values("llama", "qwen2", "gemma3", "gemma2", "phi3", "starcoder2",
                                                             "olmo2"));

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

// The bytes of a file, and a copy of them written under another name.
std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string write_copy(const std::string& path, const std::string& bytes, const std::string& suffix) {
  const std::string out = path + suffix;
  std::ofstream(out, std::ios::binary) << bytes;
  return out;
}

std::string load_error(const std::string& path) {
  auto file = GgufFile::open(path);
  EXPECT_TRUE(file.is_ok()) << file.status().message();
  if (!file.is_ok()) return "";
  ThreadPool pool(1);
  auto model = Model::load(*file, pool);
  return model.is_ok() ? "" : model.status().message();
}

// Gemma 2's own keys (soft caps, sliding window) are required: a file without one, or
// with a cap that is not positive, is refused in one line naming the file and the key.
TEST(ModelLoad, Gemma2KeysMissingOrWrongAreClearErrors) {
  const std::string path = tiny_model("gemma2", DType::F32);
  const std::string bytes = read_bytes(path);
  for (const std::string key : {"gemma2.attn_logit_softcapping", "gemma2.final_logit_softcapping",
                                "gemma2.attention.sliding_window"}) {
    const size_t at = bytes.find(key);
    ASSERT_NE(at, std::string::npos) << key;
    std::string missing = bytes;
    missing[at + 2] = 'X';  // "geXma2...": the key is gone
    const std::string broken = write_copy(path, missing, ".missing.gguf");
    const std::string msg = load_error(broken);
    EXPECT_NE(msg.find(broken), std::string::npos) << msg;
    EXPECT_NE(msg.find(key), std::string::npos) << msg;
    EXPECT_NE(msg.find("missing"), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
  // The value follows the key: its type (u32), then the f32 itself; make it -1.
  const std::string key = "gemma2.final_logit_softcapping";
  std::string wrong = bytes;
  const float minus_one = -1.0f;
  std::memcpy(&wrong[bytes.find(key) + key.size() + 4], &minus_one, 4);
  const std::string broken = write_copy(path, wrong, ".wrong.gguf");
  const std::string msg = load_error(broken);
  EXPECT_NE(msg.find(broken), std::string::npos) << msg;
  EXPECT_NE(msg.find(key + " must be a positive number"), std::string::npos) << msg;
}

// The config the gemma2 spec derives: alternating local and global layers, both with the
// file's RoPE, the caps, Gemma's embedding scale and attention scale.
TEST(ModelLoad, Gemma2ConfigFollowsLlamaCpp) {
  const std::string path = tiny_model("gemma2", DType::F32);
  auto file = GgufFile::open(path);
  ASSERT_TRUE(file.is_ok());
  ThreadPool pool(1);
  auto model = Model::load(*file, pool);
  ASSERT_TRUE(model.is_ok()) << model.status().message();
  const ModelConfig& c = (*model)->config();
  ASSERT_EQ(c.n_layer, 2);
  EXPECT_TRUE(c.layer_is_local[0]);
  EXPECT_FALSE(c.layer_is_local[1]);
  EXPECT_EQ(c.sliding_window, 4);
  EXPECT_EQ(c.rope.layout, RopeLayout::kNeox);
  EXPECT_EQ(c.rope_local.freq_base, c.rope.freq_base);
  EXPECT_GT(c.attn_softcap, 0.0f);
  EXPECT_GT(c.final_softcap, 0.0f);
  EXPECT_EQ(c.embed_scale, std::sqrt(static_cast<float>(c.n_embd)));
  EXPECT_EQ(c.attn_scale, 1.0f / std::sqrt(static_cast<float>(c.head_dim)));
  EXPECT_EQ((*model)->weights().output.data, (*model)->weights().tok_embd.data);
}

// StarCoder2: LayerNorms with their biases and epsilon from
// starcoder2.attention.layer_norm_epsilon (required: refused in one line naming file and
// key), biases on every matrix but the output, an ungated GELU MLP, NeoX RoPE, tied output.
TEST(ModelLoad, Starcoder2ConfigAndItsRequiredEpsilon) {
  const std::string path = tiny_model("starcoder2", DType::F32);
  {
    auto file = GgufFile::open(path);
    ASSERT_TRUE(file.is_ok());
    ThreadPool pool(1);
    auto model = Model::load(*file, pool);
    ASSERT_TRUE(model.is_ok()) << model.status().message();
    const ModelConfig& c = (*model)->config();
    const ModelWeights& w = (*model)->weights();
    EXPECT_EQ(c.norm, NormKind::kLayer);
    EXPECT_EQ(c.norm_eps, 1e-5f);
    EXPECT_EQ(c.act, FfnActivation::kGeluTanh);
    EXPECT_EQ(c.rope.layout, RopeLayout::kNeox);
    EXPECT_EQ(c.sliding_window, 0);
    EXPECT_NE(w.output_norm_b, nullptr);
    for (const LayerWeights& L : w.layers) {
      EXPECT_TRUE(L.gate.empty());
      EXPECT_NE(L.attn_norm_b, nullptr);
      EXPECT_NE(L.ffn_norm_b, nullptr);
      EXPECT_NE(L.bq, nullptr);
      EXPECT_NE(L.bo, nullptr);
      EXPECT_NE(L.b_up, nullptr);
      EXPECT_NE(L.b_down, nullptr);
    }
    EXPECT_EQ(w.output.data, w.tok_embd.data);
  }
  const std::string key = "starcoder2.attention.layer_norm_epsilon";
  std::string bytes = read_bytes(path);
  const size_t at = bytes.find(key);
  ASSERT_NE(at, std::string::npos);
  bytes[at + 2] = 'X';
  const std::string broken = write_copy(path, bytes, ".missing.gguf");
  const std::string msg = load_error(broken);
  EXPECT_NE(msg.find(broken), std::string::npos) << msg;
  EXPECT_NE(msg.find("missing metadata key " + key), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
}

// OLMo 2: no pre-norms, post-norms, QK-norm over whole rows (q_dim and kv_dim values), its
// own output matrix; olmo2.attention.layer_norm_rms_epsilon is required, and a file with
// OLMo 3's sliding window is refused (both in one line naming file and key).
TEST(ModelLoad, Olmo2ConfigAndItsRefusals) {
  const std::string path = tiny_model("olmo2", DType::F32);
  {
    auto file = GgufFile::open(path);
    ASSERT_TRUE(file.is_ok());
    ThreadPool pool(1);
    auto model = Model::load(*file, pool);
    ASSERT_TRUE(model.is_ok()) << model.status().message();
    const ModelConfig& c = (*model)->config();
    const ModelWeights& w = (*model)->weights();
    EXPECT_EQ(c.norm, NormKind::kRms);
    EXPECT_EQ(c.norm_eps, 1e-6f);
    EXPECT_EQ(c.act, FfnActivation::kSilu);
    EXPECT_EQ(c.rope.layout, RopeLayout::kNeox);
    EXPECT_EQ(file->find_tensor("blk.0.attn_q_norm.weight")->num_elements(), c.q_dim());
    EXPECT_EQ(file->find_tensor("blk.0.attn_k_norm.weight")->num_elements(), c.kv_dim());
    for (const LayerWeights& L : w.layers) {
      EXPECT_EQ(L.attn_norm, nullptr);
      EXPECT_EQ(L.ffn_norm, nullptr);
      EXPECT_NE(L.q_norm, nullptr);
      EXPECT_NE(L.post_attn_norm, nullptr);
      EXPECT_NE(L.post_ffw_norm, nullptr);
      EXPECT_FALSE(L.gate.empty());
    }
    EXPECT_NE(w.output.data, w.tok_embd.data);
  }
  const std::string bytes = read_bytes(path);
  const std::string key = "olmo2.attention.layer_norm_rms_epsilon";
  std::string missing = bytes;
  const size_t at = missing.find(key);
  ASSERT_NE(at, std::string::npos);
  missing[at + 2] = 'X';
  std::string broken = write_copy(path, missing, ".missing.gguf");
  std::string msg = load_error(broken);
  EXPECT_NE(msg.find(broken), std::string::npos) << msg;
  EXPECT_NE(msg.find("missing metadata key " + key), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  // OLMo 3 (olmo2 with a sliding window): every 4th layer global, as the converter's
  // per-layer flags say; the local layers' RoPE without scaling.
  RandomModelSpec s;
  s.arch = "olmo2";
  s.layers = 8;
  s.sliding_window = 5;
  s.swa_pattern = 4;
  s.rope_scaling = "linear";
  const auto swa_path = (std::filesystem::temp_directory_path() / "pagoda_forward_olmo2_swa.gguf").string();
  ASSERT_TRUE(write_random_model(s, swa_path).is_ok());
  auto file = GgufFile::open(swa_path);
  ASSERT_TRUE(file.is_ok());
  ThreadPool pool(1);
  auto model = Model::load(*file, pool);
  ASSERT_TRUE(model.is_ok()) << model.status().message();
  const ModelConfig& c = (*model)->config();
  EXPECT_EQ(c.sliding_window, 5);
  for (int32_t l = 0; l < 8; ++l) EXPECT_EQ(c.layer_is_local[l], (l + 1) % 4 != 0) << l;
  EXPECT_EQ(c.rope.freq_scale, 0.25f);
  EXPECT_EQ(c.rope_local.freq_scale, 1.0f);
  EXPECT_EQ(c.rope_local.freq_base, c.rope.freq_base);
  KvCache kv = (*model)->make_cache(16);
  std::vector<float> logits(c.n_vocab);
  const std::vector<int32_t> prompt = {1, 300, 301, 45, 77, 99, 12, 400, 260, 261};
  ASSERT_TRUE((*model)->forward(prompt, 0, kv, logits.data()).is_ok());
  for (float v : logits) ASSERT_TRUE(std::isfinite(v));
}

// Phi-3's fused matrices bind as row ranges of one tensor, and LongRoPE's factors follow
// the context: the long ones beyond rope.scaling.original_context_length (llama.cpp's
// n_ctx_seq > n_ctx_orig_yarn), the short ones up to it; load picks for the trained one.
TEST(ModelLoad, Phi3FusedMatricesAndLongRopeFactors) {
  const auto path = (std::filesystem::temp_directory_path() / "pagoda_forward_phi3_longrope.gguf").string();
  RandomModelSpec s;
  s.arch = "phi3";
  s.rope_dims = 12;
  s.longrope = true;
  s.rope_orig_ctx = 64;
  ASSERT_TRUE(write_random_model(s, path).is_ok());
  auto file = GgufFile::open(path);
  ASSERT_TRUE(file.is_ok());
  ThreadPool pool(1);
  auto loaded = Model::load(*file, pool);
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().message();
  Model& m = **loaded;
  const ModelConfig& c = m.config();
  const LayerWeights& L = m.weights().layers[0];
  const GgufTensor* qkv = file->find_tensor("blk.0.attn_qkv.weight");
  const GgufTensor* up = file->find_tensor("blk.0.ffn_up.weight");
  ASSERT_NE(qkv, nullptr);
  ASSERT_NE(up, nullptr);
  EXPECT_EQ(file->find_tensor("blk.0.attn_q.weight"), nullptr);
  EXPECT_EQ(file->find_tensor("blk.0.ffn_gate.weight"), nullptr);
  EXPECT_EQ(L.wq.data, qkv->data);
  EXPECT_EQ(L.wk.data, L.wq.data + c.q_dim() * L.wq.row_stride);
  EXPECT_EQ(L.wv.data, L.wk.data + c.kv_dim() * L.wk.row_stride);
  EXPECT_EQ(L.wq.rows, c.q_dim());
  EXPECT_EQ(L.wv.rows, c.kv_dim());
  EXPECT_EQ(L.gate.data, up->data);
  EXPECT_EQ(L.up.data, up->data + c.n_ff * L.gate.row_stride);
  EXPECT_EQ(L.up.rows, c.n_ff);
  EXPECT_EQ(c.rope.rot_dims, 12);
  EXPECT_EQ(c.rope.layout, RopeLayout::kNeox);
  EXPECT_EQ(c.rope_orig_ctx, 64);
  EXPECT_GT(c.rope.attn_factor, 1.0f);  // sqrt(1 + ln(2048 / 64) / ln 64)
  EXPECT_EQ(c.rope.freq_factors, m.weights().rope_long);  // trained context 2048 > 64
  std::vector<float> long_logits(c.n_vocab), short_logits(c.n_vocab);
  const std::vector<int32_t> prompt = {1, 300, 301, 45, 77, 99, 12, 400, 260, 261};
  {
    KvCache kv = m.make_cache(64);
    ASSERT_TRUE(m.forward(prompt, 0, kv, long_logits.data()).is_ok());
  }
  m.set_context_length(64);
  EXPECT_EQ(c.rope.freq_factors, m.weights().rope_short);
  {
    KvCache kv = m.make_cache(64);
    ASSERT_TRUE(m.forward(prompt, 0, kv, short_logits.data()).is_ok());
  }
  EXPECT_NE(long_logits, short_logits);
  m.set_context_length(65);
  EXPECT_EQ(c.rope.freq_factors, m.weights().rope_long);
}

// A LongRoPE file needs both factor tensors.
TEST(ModelLoad, LongRopeWithOneFactorTensorIsAClearError) {
  const auto path = (std::filesystem::temp_directory_path() / "pagoda_forward_phi3_longrope_one.gguf").string();
  RandomModelSpec s;
  s.arch = "phi3";
  s.longrope = true;
  ASSERT_TRUE(write_random_model(s, path).is_ok());
  std::string bytes = read_bytes(path);
  const size_t at = bytes.find("rope_factors_short.weight");
  ASSERT_NE(at, std::string::npos);
  bytes[at] = 'X';
  const std::string broken = write_copy(path, bytes, ".broken.gguf");
  const std::string msg = load_error(broken);
  EXPECT_NE(msg.find(broken), std::string::npos) << msg;
  EXPECT_NE(msg.find("missing tensor rope_factors_short.weight"), std::string::npos) << msg;
}

}  // namespace
}  // namespace pagoda

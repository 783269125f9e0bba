// Hostile hyper-parameters: every value a model is sized by is checked, in 64-bit
// arithmetic, before anything is allocated by it. Each case rewrites a generated model
// with one key changed and expects one clear error (never bad_alloc, a signed overflow
// or a truncated value read as another).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "base/thread_pool.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "model/kv_cache.h"
#include "model/model.h"
#include "model/random_model.h"

namespace pagoda {
namespace {

GgufValue u32(uint64_t v) { return GgufValue{GgufType::UINT32, v}; }
GgufValue u64(uint64_t v) { return GgufValue{GgufType::UINT64, v}; }
GgufValue f32(double v) { return GgufValue{GgufType::FLOAT32, v}; }
GgufValue str(std::string v) { return GgufValue{GgufType::STRING, std::move(v)}; }

class HostileConfig : public ::testing::Test {
 protected:
  std::filesystem::path dir_ = std::filesystem::temp_directory_path() /
                               ("pagoda_config_validation_" + std::to_string(::getpid()));
  void SetUp() override { std::filesystem::create_directories(dir_); }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string base(const std::string& arch) {
    const std::string path = (dir_ / (arch + ".gguf")).string();
    if (!std::filesystem::exists(path)) {
      RandomModelSpec s;
      s.arch = arch;
      s.type = DType::Q8_0;
      s.sliding_window = 4;
      EXPECT_TRUE(write_random_model(s, path).is_ok());
    }
    return path;
  }

  // The base model of `arch` with `key` set to `value`, written with `alignment`.
  std::string with(const std::string& arch, const std::string& key, GgufValue value, uint64_t alignment = 32,
                   const std::string& name = "edited.gguf") {
    auto src = GgufFile::open(base(arch));
    EXPECT_TRUE(src.is_ok());
    GgufWriter w(alignment);
    for (const auto& [k, v] : src->metadata())
      if (k != "general.alignment" && k != key) w.set(k, v);
    if (!key.empty()) w.set(key, std::move(value));
    for (const auto& t : src->tensors()) w.add_tensor_bytes(t.name, t.shape, t.type, t.data, t.nbytes);
    const std::string path = (dir_ / name).string();
    const Status st = w.write(path);
    EXPECT_TRUE(st.is_ok()) << st.message();
    return path;
  }

  // Model::load's error for the file ("" when it loads).
  static std::string load_error(const std::string& path) {
    auto f = GgufFile::open(path);
    if (!f) return f.status().message();
    ThreadPool pool(1);
    auto m = Model::load(*f, pool, false);
    return m ? std::string() : m.status().message();
  }
};

TEST_F(HostileConfig, BlockCountBeyondTheTensorsIsRefusedBeforeLayersAreAllocated) {
  for (uint64_t n : {uint64_t{100000000}, uint64_t{1} << 24, uint64_t{1} << 30}) {
    const std::string e = load_error(with("llama", "llama.block_count", u32(n)));
    EXPECT_NE(e.find("block_count"), std::string::npos) << n << ": " << e;
  }
  // One more layer than the file has: the missing tensors are named.
  const std::string e = load_error(with("llama", "llama.block_count", u32(3)));
  EXPECT_NE(e.find("blk.2."), std::string::npos) << e;
}

TEST_F(HostileConfig, ExpertCountsAreCheckedAgainstTheArchitectureAndTheTensors) {
  // The base qwen2moe model has 4 experts, 2 per token.
  ASSERT_EQ(load_error(base("qwen2moe")), "");
  std::string e = load_error(with("qwen2moe", "qwen2moe.expert_count", u32(0)));
  EXPECT_NE(e.find("needs metadata qwen2moe.expert_count > 0"), std::string::npos) << e;
  e = load_error(with("qwen2moe", "qwen2moe.expert_used_count", u32(5)));
  EXPECT_NE(e.find("expert_used_count = 5 is out of range [1, 4]"), std::string::npos) << e;
  e = load_error(with("qwen2moe", "qwen2moe.expert_count", u64(uint64_t{1} << 40)));
  EXPECT_NE(e.find("expert_count = " + std::to_string(uint64_t{1} << 40) + " is out of range"), std::string::npos) << e;
  // More experts than the tensors hold: the router's shape is named.
  e = load_error(with("qwen2moe", "qwen2moe.expert_count", u32(8)));
  EXPECT_NE(e.find("blk.0.ffn_gate_inp.weight has shape 64x4, expected [64, 8]"), std::string::npos) << e;
  // A dense architecture with experts is refused, naming those that have them.
  e = load_error(with("qwen2", "qwen2.expert_count", u32(4)));
  EXPECT_NE(e.find("qwen2 has 4 experts per layer; Pagoda runs experts in llama, qwen2moe, qwen3moe, olmoe"),
            std::string::npos)
      << e;
}

TEST_F(HostileConfig, RankPoolingWithoutAClassificationHeadIsRefused) {
  ASSERT_EQ(load_error(base("bert")), "");
  std::string e = load_error(with("bert", "bert.pooling_type", u32(4)));
  EXPECT_NE(e.find("pooling_type is 4 (rank) but the file has no classification head (cls.output.weight)"),
            std::string::npos)
      << e;
  e = load_error(with("bert", "bert.pooling_type", u32(5)));
  EXPECT_NE(e.find("pooling_type = 5 is out of range"), std::string::npos) << e;
}

TEST_F(HostileConfig, WideIntegersAreRangeCheckedNotTruncated) {
  // A U64 of 2^40 must not read as 0 ("missing") nor 2^32 + 64 as 64.
  for (uint64_t n : {uint64_t{1} << 40, (uint64_t{1} << 32) + 64, uint64_t{1} << 31}) {
    const std::string e = load_error(with("gemma3", "gemma3.attention.sliding_window", u64(n)));
    EXPECT_NE(e.find("sliding_window = " + std::to_string(n) + " is out of range"), std::string::npos) << e;
    const std::string c = load_error(with("llama", "llama.context_length", u64(n)));
    EXPECT_NE(c.find("context_length = " + std::to_string(n) + " is out of range"), std::string::npos) << c;
  }
  const std::string e = load_error(with("llama", "llama.embedding_length", str("64")));
  EXPECT_NE(e.find("must be an integer"), std::string::npos) << e;
}

TEST_F(HostileConfig, WindowAtTheBoundRunsWithoutOverflow) {
  // 2^30, the largest window accepted: window arithmetic (KV layout, attention's first
  // position) must stay in range. A window beyond the context is full attention.
  const std::string path = with("gemma3", "gemma3.attention.sliding_window", u32(uint64_t{1} << 30));
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  ThreadPool pool(1);
  auto m = Model::load(*f, pool, false);
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  KvCache kv = (*m)->make_cache(16);
  std::vector<float> logits((*m)->config().n_vocab);
  const std::vector<int32_t> prompt = {1, 300, 301, 45, 46, 47};
  ASSERT_TRUE((*m)->forward(prompt, 0, kv, logits.data()).is_ok());
  for (float v : logits) ASSERT_TRUE(std::isfinite(v));
}

TEST_F(HostileConfig, HeadProductsThatOverflowAreRefused) {
  struct Case {
    const char* key;
    uint64_t value;
  };
  for (const Case& c : {Case{"llama.attention.head_count", uint64_t{1} << 30},
                        Case{"llama.attention.key_length", uint64_t{1} << 30},
                        Case{"llama.attention.head_count_kv", uint64_t{1} << 30},
                        Case{"llama.feed_forward_length", uint64_t{1} << 31}}) {
    const std::string e = load_error(with("llama", c.key, u32(c.value)));
    EXPECT_NE(e.find("out of range"), std::string::npos) << c.key << " = " << c.value << ": " << e;
  }
}

TEST_F(HostileConfig, NonFiniteFloatsAreRefused) {
  for (double v : {std::nan(""), -1.0, std::numeric_limits<double>::infinity()}) {
    const std::string e = load_error(with("llama", "llama.rope.freq_base", f32(v)));
    EXPECT_NE(e.find("rope.freq_base"), std::string::npos) << v << ": " << e;
    const std::string eps = load_error(with("llama", "llama.attention.layer_norm_rms_epsilon", f32(v)));
    EXPECT_NE(eps.find("layer_norm_rms_epsilon"), std::string::npos) << v << ": " << eps;
  }
}

TEST_F(HostileConfig, MetadataStringsInErrorsAreEscapedAndCut) {
  const std::string hostile = "\x1b]0;owned\x07\x1b[2J" + std::string(1 << 20, 'A');
  auto check = [&](const std::string& e) {
    EXPECT_LT(e.size(), 600u) << "a 1 MiB value must not make a 1 MB message";
    for (char ch : e) ASSERT_FALSE(static_cast<unsigned char>(ch) < 0x20) << "control byte in: " << e.substr(0, 200);
    EXPECT_NE(e.find("\\x1b"), std::string::npos) << e.substr(0, 200);
    const std::string note = fmt::format("({} bytes)", hostile.size());
    EXPECT_NE(e.find(note), std::string::npos) << e.substr(0, 300);
  };
  check(load_error(with("llama", "general.architecture", str(hostile))));
  check(load_error(with("llama", "llama.rope.scaling.type", str(hostile))));
}

TEST_F(HostileConfig, TensorsAreAlignedForTheirBlocksWhateverTheFileAlignment) {
  // With general.alignment = 1 the data section starts right after the header, at an
  // odd offset for some header lengths: a Q8_0 tensor there would be read misaligned
  // (UBSan: misaligned load of the FP16 scale). Padding a string key moves the data
  // start; every variant must load with each tensor at its block alignment (copied when
  // the mapping has it misaligned) and give the logits of the 32-aligned file.
  auto logits_of = [](const std::string& path) {
    auto f = GgufFile::open(path);
    EXPECT_TRUE(f.is_ok()) << f.status().message();
    for (const auto& t : f->tensors())
      EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data) % block_alignment(dtype_info(t.type)), 0u) << t.name;
    ThreadPool pool(1);
    auto m = Model::load(*f, pool, false);
    EXPECT_TRUE(m.is_ok()) << m.status().message();
    KvCache kv = (*m)->make_cache(16);
    std::vector<float> logits((*m)->config().n_vocab);
    EXPECT_TRUE((*m)->forward(std::vector<int32_t>{1, 300, 301}, 0, kv, logits.data()).is_ok());
    int realigned = 0;
    for (const auto& t : f->tensors()) realigned += t.realigned ? 1 : 0;
    return std::make_pair(logits, realigned);
  };
  const auto [want, none] = logits_of(base("llama"));
  EXPECT_EQ(none, 0);
  int copied = 0;
  for (int pad = 0; pad < 4; ++pad) {
    const auto [got, realigned] = logits_of(
        with("llama", "general.name", str(std::string(static_cast<size_t>(pad), 'x')), 1, "align1.gguf"));
    EXPECT_EQ(got, want) << "pad " << pad;
    copied += realigned;
  }
  EXPECT_GT(copied, 0) << "no header length put a tensor below its block alignment";
}

}  // namespace
}  // namespace pagoda

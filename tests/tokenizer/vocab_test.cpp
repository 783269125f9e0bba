#include "tokenizer/vocab.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "tokenizer/tokenizer.h"

namespace pagoda {
namespace {

class VocabFromGguf : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (std::filesystem::temp_directory_path() /
             ("pagoda-vocab-" + std::to_string(::getpid()) + "-" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".gguf"))
                .string();
    w_.set_string("general.architecture", "llama");
  }
  void TearDown() override { std::filesystem::remove(path_); }

  Result<Vocab> load() {
    Status st = w_.write(path_);
    if (!st) return st;
    auto f = GgufFile::open(path_);
    if (!f) return f.status();
    return Vocab::from_gguf(*f);
  }

  void gemma_like() {
    w_.set_string("tokenizer.ggml.model", "llama");
    w_.set_string("tokenizer.ggml.pre", "default");
    w_.set_string_array("tokenizer.ggml.tokens",
                        {"<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>",
                         "\n\n", "a", "\xE2\x96\x81" "b"});
    w_.set_f32_array("tokenizer.ggml.scores", {0, 0, 0, 0, 0, 0, 0, -1, -2});
    w_.set_i32_array("tokenizer.ggml.token_type", {3, 3, 3, 2, 3, 3, 4, 1, 1});
    w_.set_u32("tokenizer.ggml.bos_token_id", 2);
    w_.set_u32("tokenizer.ggml.eos_token_id", 1);
    w_.set_u32("tokenizer.ggml.unknown_token_id", 3);
    w_.set_u32("tokenizer.ggml.padding_token_id", 0);
    w_.set_bool("tokenizer.ggml.add_bos_token", true);
    w_.set_bool("tokenizer.ggml.add_eos_token", false);
    w_.set_bool("tokenizer.ggml.add_space_prefix", false);
  }

  std::string path_;
  GgufWriter w_;
};

TEST_F(VocabFromGguf, ReadsEveryKey) {
  gemma_like();
  auto v = load();
  ASSERT_TRUE(v.is_ok()) << v.status().message();
  EXPECT_EQ(v->kind, TokenizerKind::kSentencePiece);
  EXPECT_EQ(v->pre, "default");
  ASSERT_EQ(v->pieces.size(), 9u);
  EXPECT_EQ(v->pieces[6], "\n\n");
  EXPECT_FLOAT_EQ(v->scores[8], -2.0f);
  EXPECT_EQ(v->types[6], TokenType::kUserDefined);
  EXPECT_EQ(v->bos, 2);
  EXPECT_EQ(v->eos, 1);
  EXPECT_EQ(v->unk, 3);
  EXPECT_EQ(v->pad, 0);
  EXPECT_TRUE(v->add_bos);
  EXPECT_FALSE(v->add_eos);
  EXPECT_FALSE(v->add_space_prefix);
  // eot is found by name; eog holds eos and eot.
  EXPECT_EQ(v->eot, 5);
  EXPECT_EQ(v->eog, (std::vector<int32_t>{1, 5}));

  auto tok = Tokenizer::create(std::move(v).value());
  ASSERT_TRUE(tok.is_ok());
  // "b" alone has no piece and there are no byte tokens, so it is <unk>; " b" has one.
  EXPECT_EQ((*tok)->encode("<start_of_turn>a\n\nb b", true, true),
            (std::vector<int32_t>{2, 4, 7, 6, 3, 8}));
}

TEST_F(VocabFromGguf, SeparatorIsReadAndABadOneLeftUnset) {
  gemma_like();
  w_.set_u32("tokenizer.ggml.seperator_token_id", 5);
  w_.set_bool("tokenizer.ggml.add_sep_token", true);
  auto v = load();
  ASSERT_TRUE(v.is_ok()) << v.status().message();
  EXPECT_EQ(v->sep, 5);
  EXPECT_TRUE(v->add_sep);
  // Only text pairs read it: an id outside the vocabulary does not refuse the file.
  w_.set_u32("tokenizer.ggml.seperator_token_id", 900);
  auto bad = load();
  ASSERT_TRUE(bad.is_ok()) << bad.status().message();
  EXPECT_EQ(bad->sep, -1);
}

TEST_F(VocabFromGguf, ByteLevelBpeKeys) {
  w_.set_string("tokenizer.ggml.model", "gpt2");
  w_.set_string("tokenizer.ggml.pre", "qwen2");
  w_.set_string_array("tokenizer.ggml.tokens", {"a", "b", "ab", "<|im_end|>", "<|endoftext|>"});
  w_.set_i32_array("tokenizer.ggml.token_type", {1, 1, 1, 3, 3});
  w_.set_string_array("tokenizer.ggml.merges", {"a b"});
  w_.set_u32("tokenizer.ggml.eos_token_id", 4);
  auto v = load();
  ASSERT_TRUE(v.is_ok()) << v.status().message();
  EXPECT_EQ(v->kind, TokenizerKind::kByteLevelBpe);
  EXPECT_EQ(v->merges, (std::vector<std::string>{"a b"}));
  EXPECT_TRUE(v->scores.empty());
  EXPECT_EQ(v->bos, -1);
  EXPECT_FALSE(v->add_bos);
  EXPECT_FALSE(v->add_space_prefix);
  EXPECT_EQ(v->eot, 3);
  EXPECT_EQ(v->eog, (std::vector<int32_t>{3, 4}));
}

TEST_F(VocabFromGguf, ErrorsNameTheKey) {
  w_.set_string("tokenizer.ggml.model", "rwkv");
  w_.set_string_array("tokenizer.ggml.tokens", {"a"});
  auto v = load();
  ASSERT_FALSE(v.is_ok());
  EXPECT_NE(v.status().message().find("'rwkv'"), std::string::npos);
  EXPECT_NE(v.status().message().find(path_), std::string::npos);

  gemma_like();
  w_.set_f32_array("tokenizer.ggml.scores", {0, 0});
  v = load();
  ASSERT_FALSE(v.is_ok());
  EXPECT_NE(v.status().message().find("tokenizer.ggml.scores"), std::string::npos);

  gemma_like();
  w_.set_u32("tokenizer.ggml.eos_token_id", 99);
  v = load();
  ASSERT_FALSE(v.is_ok());
  EXPECT_NE(v.status().message().find("eos_token_id"), std::string::npos);
}

TEST_F(VocabFromGguf, MissingTokensIsAnError) {
  w_.set_string("tokenizer.ggml.model", "llama");
  auto v = load();
  ASSERT_FALSE(v.is_ok());
  EXPECT_NE(v.status().message().find("tokenizer.ggml.tokens"), std::string::npos);
}

}  // namespace
}  // namespace pagoda

namespace pagoda {
namespace {

Vocab ranked_vocab(std::vector<float> scores, std::vector<TokenType> types) {
  Vocab v;
  for (size_t i = 0; i < std::max(scores.size(), types.size()); ++i) v.pieces.push_back(std::to_string(i));
  v.scores = std::move(scores);
  v.types = std::move(types);
  return v;
}

TEST(FrequentTokens, SentencePieceScoresRankHighestFirstAndTiesKeepIdOrder) {
  using T = TokenType;
  Vocab v = ranked_vocab({-1000, -1000, -5, -1, -3, 0, -1, -9},
                         {T::kControl, T::kUnknown, T::kNormal, T::kNormal, T::kNormal, T::kByte, T::kNormal,
                          T::kUserDefined});
  EXPECT_EQ(frequent_tokens(v, 100), (std::vector<int32_t>{5, 3, 6, 4, 2, 7}));
  EXPECT_EQ(frequent_tokens(v, 3), (std::vector<int32_t>{5, 3, 6}));
  EXPECT_TRUE(frequent_tokens(v, 0).empty());
}

TEST(FrequentTokens, ByteLevelBpeRanksByIdAndKeepsEndOfGeneration) {
  using T = TokenType;
  Vocab v = ranked_vocab({}, {T::kNormal, T::kNormal, T::kControl, T::kNormal, T::kUnused, T::kControl});
  v.eos = 5;
  v.fill_eog();
  // Control tokens cannot follow text, but the end of generation can.
  EXPECT_EQ(frequent_tokens(v, 10), (std::vector<int32_t>{0, 1, 3, 5}));
}

}  // namespace
}  // namespace pagoda

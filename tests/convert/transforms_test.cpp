// The value changes between HF and GGUF tensors: llama.cpp's Q/K permutation (checked
// against the definition written out by hand, numpy's reshape/swapaxes) and its inverse,
// and the WordPiece phantom-space mapping.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "convert/hf_vocab.h"
#include "convert/output_type.h"
#include "convert/tensor_transforms.h"

namespace pagoda {
namespace {

TEST(RopePermute, MatchesLlamaCppsReshapeSwapaxes) {
  // 2 heads of 4 rows, rows of 3: llama.cpp's permute reshapes to (heads, 2, rows/2, 3)
  // and swaps axes 1 and 2, so head h's rows [a0 a1 b0 b1] become [a0 b0 a1 b1].
  const int64_t rows = 8, len = 3;
  std::vector<float> in(rows * len);
  std::iota(in.begin(), in.end(), 0.0f);
  std::vector<float> out(in.size());
  rope_permute_rows(in.data(), out.data(), rows, len, 2);
  const int order[] = {0, 2, 1, 3, 4, 6, 5, 7};
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < len; ++c) EXPECT_EQ(out[r * len + c], in[order[r] * len + c]) << r << "," << c;
}

TEST(RopePermute, HeadsOfSixRowsInterleaveTheirHalves) {
  // One head of 6 rows (head_dim 6): halves [0 1 2] and [3 4 5] -> 0 3 1 4 2 5.
  std::vector<float> in = {0, 1, 2, 3, 4, 5}, out(6);
  rope_permute_rows(in.data(), out.data(), 6, 1, 1);
  EXPECT_EQ(out, (std::vector<float>{0, 3, 1, 4, 2, 5}));
}

TEST(RopePermute, UnpermuteUndoesIt) {
  const int64_t rows = 24, len = 5;
  std::vector<float> in(rows * len);
  std::iota(in.begin(), in.end(), 1.0f);
  std::vector<float> p(in.size()), back(in.size());
  rope_permute_rows(in.data(), p.data(), rows, len, 3);
  EXPECT_NE(p, in);
  rope_unpermute_rows(p.data(), back.data(), rows, len, 3);
  EXPECT_EQ(back, in);
}

TEST(AddOne, ShiftsEveryValue) {
  std::vector<float> x = {0.0f, -1.0f, 2.5f};
  add_one(x.data(), 3);
  EXPECT_EQ(x, (std::vector<float>{1.0f, 0.0f, 3.5f}));
}

TEST(Phantom, WordInitialPiecesGetTheSpaceContinuationsLoseTheirPrefix) {
  EXPECT_EQ(phantom_piece("hello", kTokNormal), "\xe2\x96\x81hello");
  EXPECT_EQ(phantom_piece("##ing", kTokNormal), "ing");
  EXPECT_EQ(phantom_piece("[CLS]", kTokControl), "[CLS]");
  EXPECT_EQ(phantom_piece("##", kTokNormal), "");
  EXPECT_EQ(phantom_piece("#", kTokNormal), "\xe2\x96\x81#");
  // Only control tokens keep their text: a bracketed piece that is not special is a word.
  EXPECT_EQ(phantom_piece("[unused0]", kTokNormal), "\xe2\x96\x81[unused0]");
}

TEST(BpePre, RecognisesTheByteLevelFamilies) {
  using nlohmann::json;
  auto gpt2 = detect_bpe_pre(json{{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}});
  ASSERT_TRUE(gpt2.is_ok());
  EXPECT_EQ(*gpt2, "gpt-2");
  const auto seq = [](const std::string& regex) {
    return json{{"type", "Sequence"},
                {"pretokenizers",
                 json::array({json{{"type", "Split"}, {"pattern", json{{"Regex", regex}}}, {"behavior", "Isolated"}},
                              json{{"type", "ByteLevel"}, {"use_regex", false}}})}};
  };
  auto qwen =
      detect_bpe_pre(seq("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
                         "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"));
  ASSERT_TRUE(qwen.is_ok());
  EXPECT_EQ(*qwen, "qwen2");
  auto llama =
      detect_bpe_pre(seq("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
                         "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"));
  ASSERT_TRUE(llama.is_ok());
  EXPECT_EQ(*llama, "llama-bpe");
  EXPECT_FALSE(detect_bpe_pre(seq("\\w+")).is_ok());
  EXPECT_FALSE(detect_bpe_pre(json{{"type", "Metaspace"}}).is_ok());
  EXPECT_FALSE(detect_bpe_pre(json()).is_ok());
}

TEST(OutputType, VectorsNormsAndPositionTablesStayF32) {
  const std::vector<int64_t> vec = {384}, mat = {384, 1536}, odd = {100, 7};
  EXPECT_EQ(convert_output_type("blk.0.attn_q.bias", vec, DType::Q8_0).type, DType::F32);
  EXPECT_EQ(convert_output_type("blk.0.attn_q_norm.weight", mat, DType::F16).type, DType::F32);
  EXPECT_EQ(convert_output_type("position_embd.weight", mat, DType::F16).type, DType::F32);
  EXPECT_EQ(convert_output_type("token_types.weight", mat, DType::F16).type, DType::F32);
  EXPECT_EQ(convert_output_type("blk.0.attn_q.weight", mat, DType::Q8_0).type, DType::Q8_0);
  EXPECT_EQ(convert_output_type("token_embd.weight", mat, DType::F16).type, DType::F16);
  const OutputTypeChoice fb = convert_output_type("blk.0.ffn_up.weight", odd, DType::Q8_0);
  EXPECT_EQ(fb.type, DType::F16);
  EXPECT_FALSE(fb.note.empty());
}

}  // namespace
}  // namespace pagoda

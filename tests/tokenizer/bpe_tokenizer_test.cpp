#include <gtest/gtest.h>

#include "test_vocabs.h"

namespace pagoda {
namespace {

using test::bl;
using test::bpe_vocab;
using test::id_of;
using test::make;
using Ids = std::vector<int32_t>;

TEST(BpeTokenizer, MergesLowestRankFirst) {
  Vocab v = bpe_vocab({{"b", "c"}, {"a", "b"}});
  EXPECT_EQ(make(v)->encode("abc", false, false), (Ids{'a', id_of(v, bl("bc"))}));
  Vocab w = bpe_vocab({{"a", "b"}, {"b", "c"}});
  EXPECT_EQ(make(w)->encode("abc", false, false), (Ids{id_of(w, bl("ab")), 'c'}));
}

TEST(BpeTokenizer, MergesBuildOnEarlierMerges) {
  Vocab v = bpe_vocab({{" ", "t"}, {"h", "e"}, {" t", "he"}, {"r", "e"}, {" the", "re"}});
  auto tok = make(v);
  EXPECT_EQ(tok->encode(" there the", false, false),
            (Ids{id_of(v, bl(" there")), id_of(v, bl(" the"))}));
  // Each byte is its own token when nothing merges, and spaces are bytes like any other.
  EXPECT_EQ(tok->encode("\xE2\x82\xAC", false, false), (Ids{0xE2, 0x82, 0xAC}));
}

TEST(BpeTokenizer, MergesStayInsideWords) {
  // "a b" would merge into "a " if words did not split the text first.
  Vocab v = bpe_vocab({{"a", " "}});
  EXPECT_EQ(make(v)->encode("a b", false, false), (Ids{'a', ' ', 'b'}));
  // "'s" is its own word even after letters.
  Vocab w = bpe_vocab({{"t", "'"}});
  EXPECT_EQ(make(w)->encode("it's", false, false), (Ids{'i', 't', '\'', 's'}));
}

TEST(BpeTokenizer, Llama3LooksUpWholeWordsFirst) {
  // "xyz" is a token the merges cannot reach; Llama 3 (ignore_merges) still finds it.
  Vocab gpt2 = bpe_vocab({}, "default", {"xyz"});
  EXPECT_EQ(make(gpt2)->encode("xyz", false, false), (Ids{'x', 'y', 'z'}));
  Vocab llama3 = bpe_vocab({}, "llama-bpe", {"xyz"});
  EXPECT_EQ(make(llama3)->encode("xyz", false, false), (Ids{id_of(llama3, bl("xyz"))}));
}

TEST(BpeTokenizer, DecodeMapsPiecesBackToBytes) {
  Vocab v = bpe_vocab({{" ", "\n"}, {"\xC3", "\xA9"}});
  auto tok = make(v);
  const Ids ids = tok->encode("caf\xC3\xA9 \n\xFF", false, false);
  EXPECT_EQ(tok->decode(ids), "caf\xC3\xA9 \n\xFF");
  EXPECT_EQ(tok->token_to_bytes(' '), " ");
  EXPECT_EQ(tok->token_to_bytes(id_of(v, bl("\xC3\xA9"))), "\xC3\xA9");
}

TEST(BpeTokenizer, SpecialTokensAndBos) {
  Vocab v = bpe_vocab({{"h", "i"}});
  v.pieces.push_back("<|begin|>");
  v.types.push_back(TokenType::kControl);
  v.pieces.push_back("<|im_end|>");
  v.types.push_back(TokenType::kControl);
  v.pieces.push_back("<think>");  // user-defined: stored as plain text
  v.types.push_back(TokenType::kUserDefined);
  const int32_t bos = id_of(v, "<|begin|>"), end = id_of(v, "<|im_end|>");
  const int32_t think = id_of(v, "<think>"), hi = id_of(v, bl("hi"));
  v.bos = bos;
  v.add_bos = true;
  auto tok = make(v);
  EXPECT_EQ(tok->encode("hi<|im_end|>", true, true), (Ids{bos, hi, end}));
  EXPECT_EQ(tok->encode("<think>hi", false, false), (Ids{think, hi}));
  // Without parsing, the marker is ordinary text: words "<|", "im", "_", "end", "|>".
  EXPECT_EQ(tok->encode("hi<|im_end|>", false, false),
            (Ids{hi, '<', '|', 'i', 'm', '_', 'e', 'n', 'd', '|', '>'}));
  EXPECT_EQ(tok->decode({bos, hi, end, think}), "hi<think>");
  EXPECT_EQ(tok->decode({bos, hi, end}, /*render_special=*/true), "<|begin|>hi<|im_end|>");
  EXPECT_TRUE(tok->is_eog(end));  // <|im_end|> ends a turn
}

TEST(BpeTokenizer, UnknownPreTokenizerIsAnError) {
  auto r = Tokenizer::create(bpe_vocab({}, "no-such-regex"));
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("no-such-regex"), std::string::npos);
}

// Gemma 4's BPE over raw UTF-8: spaces become "▁" before merging, characters (not GPT-2
// bytes) are the first symbols, a character with no piece falls back to <0xAB> tokens,
// and a run of newlines that is a token is taken whole.
Vocab raw_utf8_vocab() {
  Vocab v;
  v.kind = TokenizerKind::kByteLevelBpe;
  v.pre = "gemma4";
  v.add_space_prefix = false;
  static constexpr char kHex[] = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) {
    v.pieces.push_back(std::string{'<', '0', 'x', kHex[b >> 4], kHex[b & 15], '>'});
    v.types.push_back(TokenType::kByte);
  }
  const std::string sp = "\xE2\x96\x81";
  for (const std::string& p : {std::string("a"), std::string("b"), sp, sp + "a", std::string("ab"), sp + "ab",
                               std::string("\n"), std::string("\n\n\n")}) {
    v.pieces.push_back(p);
    v.types.push_back(TokenType::kNormal);
  }
  v.merges = {sp + " a", "a b", sp + "a b"};
  return v;
}

TEST(BpeTokenizer, RawUtf8MergesCharactersWithSpacesAsWordMarks) {
  const Vocab v = raw_utf8_vocab();
  auto tok = make(v);
  const std::string sp = "\xE2\x96\x81";
  // a b ▁ a b: "▁ a" (rank 0) first, then "a b", then "▁a b".
  EXPECT_EQ(tok->encode("ab ab", false, false), (Ids{id_of(v, "ab"), id_of(v, sp + "ab")}));
  EXPECT_EQ(tok->decode(tok->encode("ab ab", false, false)), "ab ab");
}

TEST(BpeTokenizer, RawUtf8FallsBackToByteTokensAndTakesNewlineRunsWhole) {
  const Vocab v = raw_utf8_vocab();
  auto tok = make(v);
  // "é" has no piece: its two bytes; "\n\n\n" is a piece of its own.
  EXPECT_EQ(tok->encode("a\xC3\xA9\n\n\n", false, false),
            (Ids{id_of(v, "a"), 0xC3, 0xA9, id_of(v, "\n\n\n")}));
  EXPECT_EQ(tok->decode(tok->encode("a\xC3\xA9\n\n\n", false, false)), "a\xC3\xA9\n\n\n");
}

}  // namespace
}  // namespace pagoda

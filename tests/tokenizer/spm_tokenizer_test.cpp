#include <gtest/gtest.h>

#include <chrono>

#include "test_vocabs.h"

namespace pagoda {
namespace {

using test::id_of;
using test::make;
using test::spm_vocab;
using Ids = std::vector<int32_t>;

constexpr const char* kSp = "\xE2\x96\x81";  // "▁"

TEST(SpmTokenizer, MergesHighestScoreFirst) {
  // "bc" outscores "ab", so "abc" must become a + bc, not ab + c.
  Vocab v = spm_vocab({{"a", -1}, {"b", -1}, {"c", -1}, {"ab", -3}, {"bc", -2}});
  v.add_space_prefix = false;
  auto tok = make(v);
  EXPECT_EQ(tok->encode("abc", false, false), (Ids{id_of(v, "a"), id_of(v, "bc")}));

  Vocab w = spm_vocab({{"a", -1}, {"b", -1}, {"c", -1}, {"ab", -2}, {"bc", -3}});
  w.add_space_prefix = false;
  EXPECT_EQ(make(w)->encode("abc", false, false), (Ids{id_of(w, "ab"), id_of(w, "c")}));
}

TEST(SpmTokenizer, EqualScoresMergeLeftmostFirst) {
  Vocab v = spm_vocab({{"a", -1}, {"aa", -2}});
  v.add_space_prefix = false;
  const int32_t a = id_of(v, "a"), aa = id_of(v, "aa");
  EXPECT_EQ(make(v)->encode("aaa", false, false), (Ids{aa, a}));
}

TEST(SpmTokenizer, MergesThroughIntermediatePieces) {
  const std::string sp = kSp;
  Vocab v = spm_vocab({{sp, -1},         {"h", -1},        {"e", -1},          {"l", -1},
                       {"o", -1},        {"he", -2},       {"ll", -3},         {"llo", -4},
                       {sp + "h", -5},   {"hello", -6},    {sp + "hello", -7}, {"w", -1},
                       {"r", -1},        {"d", -1},        {sp + "w", -2},     {"or", -3},
                       {"ld", -4},       {sp + "wor", -6}, {sp + "world", -7}, {"wor", -5}});
  auto tok = make(v);
  const Ids want = {id_of(v, sp + "hello"), id_of(v, sp + "world")};
  EXPECT_EQ(tok->encode("hello world", false, false), want);
  const Ids with_bos = {1, want[0], want[1]};
  EXPECT_EQ(tok->encode("hello world", true, false), with_bos);
  // The dummy prefix is dropped again when decoding from the start of the text.
  EXPECT_EQ(tok->decode(with_bos), "hello world");
  EXPECT_EQ(tok->decode(with_bos, /*render_special=*/true), "<s> hello world");
}

TEST(SpmTokenizer, SpacesBecomeMarksAndPrefixIsOptional) {
  const std::string sp = kSp;
  Vocab v = spm_vocab({{sp, -1}, {"a", -1}, {sp + sp, -2}, {sp + "a", -3}});
  const int32_t s = id_of(v, sp), ss = id_of(v, sp + sp), sa = id_of(v, sp + "a");
  EXPECT_EQ(make(v)->encode(" a", false, false), (Ids{ss, id_of(v, "a")}));
  EXPECT_EQ(make(v)->encode("a ", false, false), (Ids{sa, s}));
  v.add_space_prefix = false;
  EXPECT_EQ(make(v)->encode(" a", false, false), (Ids{sa}));
  EXPECT_EQ(make(v)->encode("", true, false), (Ids{1}));
  EXPECT_EQ(make(v)->encode("", false, false), (Ids{}));
}

TEST(SpmTokenizer, ByteFallbackForCharactersWithoutPiece) {
  Vocab v = spm_vocab({{"a", -1}});
  v.add_space_prefix = false;
  auto tok = make(v);
  const int32_t a = id_of(v, "a");
  // U+20AC "€" = E2 82 AC; byte token of b is 3 + b.
  EXPECT_EQ(tok->encode("a\xE2\x82\xAC", false, false), (Ids{a, 3 + 0xE2, 3 + 0x82, 3 + 0xAC}));
  EXPECT_EQ(tok->decode({a, 3 + 0xE2, 3 + 0x82, 3 + 0xAC}), "a\xE2\x82\xAC");
  // Invalid UTF-8 is kept byte for byte.
  EXPECT_EQ(tok->encode("a\xFF\xE2\x82", false, false), (Ids{a, 3 + 0xFF, 3 + 0xE2, 3 + 0x82}));
  EXPECT_EQ(tok->decode(tok->encode("a\xFF\xE2\x82", false, false)), "a\xFF\xE2\x82");
}

TEST(SpmTokenizer, UnknownWhenNoByteTokens) {
  Vocab v = spm_vocab({{"a", -1}}, /*with_bytes=*/false);
  v.add_space_prefix = false;
  const int32_t a = id_of(v, "a");
  // One <unk> per character, not per byte.
  EXPECT_EQ(make(v)->encode("a\xE2\x82\xAC" "a", false, false), (Ids{a, 0, a}));
}

TEST(SpmTokenizer, SpecialTextParsedOnlyWhenAsked) {
  const std::string sp = kSp;
  Vocab v = spm_vocab({{sp, -1}, {"x", -1}, {"<", -1}, {">", -1}, {"s", -1}, {"/", -1}});
  v.add_space_prefix = false;
  auto tok = make(v);
  const int32_t x = id_of(v, "x");
  EXPECT_EQ(tok->encode("x<s>x</s>", false, true), (Ids{x, 1, x, 2}));
  const Ids plain = tok->encode("x<s>x", false, false);
  EXPECT_EQ(plain, (Ids{x, id_of(v, "<"), id_of(v, "s"), id_of(v, ">"), x}));
}

TEST(SpmTokenizer, UserDefinedTokensAlwaysSplitOut) {
  // Like Gemma's "\n\n" and runs of spaces: matched on the raw text, longest first.
  Vocab v = spm_vocab({{"a", -1}});
  v.add_space_prefix = false;
  for (const char* p : {"\n\n", "\n\n\n", "  "}) {
    v.pieces.push_back(p);
    v.scores.push_back(0);
    v.types.push_back(TokenType::kUserDefined);
  }
  auto tok = make(v);
  const int32_t a = id_of(v, "a"), nn = id_of(v, "\n\n"), nnn = id_of(v, "\n\n\n");
  const int32_t two = id_of(v, "  ");
  EXPECT_EQ(tok->encode("a\n\n\n\n\na  a", false, false), (Ids{a, nnn, nn, a, two, a}));
  EXPECT_EQ(tok->decode({a, nnn, two}), "a\n\n\n  ");
}

TEST(SpmTokenizer, DummyPrefixAfterControlTokenOnly) {
  const std::string sp = kSp;
  Vocab v = spm_vocab({{sp, -1}, {"x", -1}, {sp + "x", -2}});
  v.pieces.push_back("\t\t");
  v.scores.push_back(0);
  v.types.push_back(TokenType::kUserDefined);
  auto tok = make(v);
  const int32_t spx = id_of(v, sp + "x"), x = id_of(v, "x"), tabs = id_of(v, "\t\t");
  EXPECT_EQ(tok->encode("x<s>x", false, true), (Ids{spx, 1, spx}));
  // A user-defined token is part of the text: what follows it gets no space.
  EXPECT_EQ(tok->encode("\t\tx", false, false), (Ids{tabs, x}));
  EXPECT_EQ(tok->decode({tabs, x}), "\t\tx");
}

TEST(SpmTokenizer, AContinuationHasNoDummyPrefixButControlTokensStillGiveOne) {
  const std::string sp = kSp;
  Vocab v = spm_vocab({{sp, -1}, {"x", -1}, {sp + "x", -2}});
  auto tok = make(v);
  const int32_t spx = id_of(v, sp + "x"), x = id_of(v, "x");
  EXPECT_EQ(tok->encode("x", false, true), (Ids{spx}));
  EXPECT_EQ(tok->encode_continuation("x"), (Ids{x}));
  EXPECT_EQ(tok->encode_continuation(" x"), (Ids{spx}));
  EXPECT_EQ(tok->encode_continuation("x<s>x"), (Ids{x, 1, spx}));  // parsed, and the prefix after it
}

TEST(SpmTokenizer, EndOfGenerationIds) {
  Vocab v = spm_vocab({{"a", -1}});
  v.pieces.push_back("<end_of_turn>");
  v.scores.push_back(0);
  v.types.push_back(TokenType::kControl);
  auto tok = make(v);
  const int32_t eot = static_cast<int32_t>(v.pieces.size()) - 1;
  EXPECT_TRUE(tok->is_eog(2));
  EXPECT_TRUE(tok->is_eog(eot));
  EXPECT_EQ(tok->vocab().eot, eot);
  EXPECT_FALSE(tok->is_eog(1));
}

TEST(SpmTokenizer, LongInputIsNotQuadratic) {
  // 400k characters in one fragment: a quadratic merge loop would take minutes.
  Vocab v = spm_vocab({{"a", -1}, {"aa", -2}, {"aaaa", -3}, {"aaaaaaaa", -4}});
  v.add_space_prefix = false;
  auto tok = make(v);
  const std::string text(400000, 'a');
  const auto t0 = std::chrono::steady_clock::now();
  const Ids ids = tok->encode(text, false, false);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(ids.size(), 50000u);
  EXPECT_LT(s, 5.0);
}

TEST(Tokenizer, CreateRejectsInconsistentVocab) {
  Vocab v = spm_vocab({{"a", -1}});
  v.scores.pop_back();
  EXPECT_FALSE(Tokenizer::create(v).is_ok());
  Vocab w = spm_vocab({{"a", -1}});
  w.eos = 100000;
  auto r = Tokenizer::create(w);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("eos"), std::string::npos);
  EXPECT_FALSE(Tokenizer::create(Vocab{}).is_ok());
}

}  // namespace
}  // namespace pagoda

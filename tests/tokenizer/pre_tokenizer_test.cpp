#include "tokenizer/pre_tokenizer.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "text/unicode_class.h"

namespace pagoda {
namespace {

std::vector<std::string> words(PreTokenizer kind, std::string_view text) {
  std::vector<WordSpan> spans;
  pre_tokenize(kind, text, spans);
  std::vector<std::string> out;
  for (const WordSpan& w : spans) out.emplace_back(text.substr(w.begin, w.end - w.begin));
  return out;
}

using W = std::vector<std::string>;

TEST(PreTokenizer, Gpt2) {
  EXPECT_EQ(words(PreTokenizer::kGpt2, "Hello world, it's 2024!"),
            (W{"Hello", " world", ",", " it", "'s", " 2024", "!"}));
  // A run of spaces leaves its last space to the next word; at the end it stays whole.
  EXPECT_EQ(words(PreTokenizer::kGpt2, "a   b  "), (W{"a", "  ", " b", "  "}));
  EXPECT_EQ(words(PreTokenizer::kGpt2, "IT'S\n\nx"), (W{"IT", "'", "S", "\n", "\n", "x"}));
}

TEST(PreTokenizer, Llama3) {
  EXPECT_EQ(words(PreTokenizer::kLlama3, "Hello world, IT'S 12345!"),
            (W{"Hello", " world", ",", " IT", "'S", " ", "123", "45", "!"}));
  // Any non-letter, non-newline character may lead a letter run.
  EXPECT_EQ(words(PreTokenizer::kLlama3, "(foo)\tbar"), (W{"(foo", ")", "\tbar"}));
  // Newlines end the whitespace word; punctuation keeps the newlines that follow it.
  EXPECT_EQ(words(PreTokenizer::kLlama3, "x \n\n  y.\n\nz"),
            (W{"x", " \n\n", " ", " y", ".\n\n", "z"}));
}

TEST(PreTokenizer, Qwen2SplitsDigitsOneByOne) {
  EXPECT_EQ(words(PreTokenizer::kQwen2, "x123"), (W{"x", "1", "2", "3"}));
}

TEST(PreTokenizer, NonAsciiClasses) {
  // "中文" letters, "١٢" Arabic-Indic digits, U+3000 ideographic space.
  EXPECT_EQ(words(PreTokenizer::kGpt2, "\xE4\xB8\xAD\xE6\x96\x87 \xD9\xA1\xD9\xA2\xE3\x80\x80!"),
            (W{"\xE4\xB8\xAD\xE6\x96\x87", " \xD9\xA1\xD9\xA2", "\xE3\x80\x80", "!"}));
  // Invalid bytes are punctuation-like, one byte each, and nothing is lost.
  EXPECT_EQ(words(PreTokenizer::kLlama3, "a\xFF\xFE b"), (W{"a", "\xFF\xFE", " b"}));
}

TEST(UnicodeClass, Samples) {
  EXPECT_EQ(unicode_class('a'), UnicodeClass::kLetter);
  EXPECT_EQ(unicode_class('7'), UnicodeClass::kNumber);
  EXPECT_EQ(unicode_class('\t'), UnicodeClass::kSpace);
  EXPECT_EQ(unicode_class('_'), UnicodeClass::kOther);
  EXPECT_EQ(unicode_class(0x4E2D), UnicodeClass::kLetter);   // 中
  EXPECT_EQ(unicode_class(0x00BD), UnicodeClass::kNumber);   // ½
  EXPECT_EQ(unicode_class(0x3000), UnicodeClass::kSpace);    // ideographic space
  EXPECT_EQ(unicode_class(0x0301), UnicodeClass::kOther);    // combining acute (a mark)
  EXPECT_EQ(unicode_class(0x1F600), UnicodeClass::kOther);   // 😀
  EXPECT_EQ(unicode_class(0x10FFFF), UnicodeClass::kOther);
}

}  // namespace
}  // namespace pagoda

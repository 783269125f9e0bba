// The pre-tokenizer table and the regex splitter: every listed name builds, the regex
// splitter keeps the gaps between matches as words (Hugging Face's "isolated"), and each
// hand-written matcher gives exactly the words of the Hugging Face regex it stands for
// (PCRE2 is the independent oracle here).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tokenizer/pre_tokenizer_table.h"
#include "tokenizer/regex_split.h"
#include "tokenizer/word_splitter.h"

namespace pagoda {
namespace {

using W = std::vector<std::string>;

W words_of(const std::vector<WordSpan>& spans, std::string_view text) {
  W w;
  for (const WordSpan& s : spans) w.emplace_back(text.substr(s.begin, s.end - s.begin));
  return w;
}

W regex_words(const std::vector<std::string_view>& patterns, std::string_view text) {
  auto r = RegexSplitter::compile(patterns);
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  std::vector<WordSpan> spans;
  r->split(text, spans);
  return words_of(spans, text);
}

TEST(RegexSplitter, GapsBetweenMatchesAreWordsToo) {
  EXPECT_EQ(regex_words({"\\p{N}"}, "ab12c"), (W{"ab", "1", "2", "c"}));
  // Patterns apply in turn, each within the pieces the previous one left.
  EXPECT_EQ(regex_words({"[\r\n]", "\\s?\\p{L}+"}, "hi there\nyou"), (W{"hi", " there", "\n", "you"}));
  EXPECT_EQ(regex_words({"x"}, ""), W{});
}

TEST(RegexSplitter, InvalidUtf8StaysInTheGaps) {
  const std::string text = "a\xFF\xFE b";
  W w = regex_words({"\\p{L}+"}, text);
  std::string joined;
  for (const auto& s : w) joined += s;
  EXPECT_EQ(joined, text);
  EXPECT_EQ(w, (W{"a", "\xFF\xFE ", "b"}));
}

TEST(RegexSplitter, BadPatternIsAnErrorNamingIt) {
  auto r = RegexSplitter::compile({"(unclosed"});
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("(unclosed"), std::string::npos) << r.status().message();
}

TEST(WordSplitter, EveryListedNameBuilds) {
  for (const PreTokenizerSpec& spec : pre_tokenizer_specs())
    for (std::string_view name : spec.names) {
      auto w = WordSplitter::for_name(name);
      EXPECT_TRUE(w.is_ok()) << name << ": " << w.status().message();
    }
  EXPECT_GT(WordSplitter::known_names(), 80u);
}

TEST(WordSplitter, UnknownNameFailsNamingIt) {
  auto w = WordSplitter::for_name("no-such-pre");
  ASSERT_FALSE(w.is_ok());
  EXPECT_NE(w.status().message().find("no-such-pre"), std::string::npos);
}

// Hugging Face's patterns for the three hand-written matchers.
constexpr std::string_view kGpt2 = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
constexpr std::string_view kLlama3 =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr std::string_view kQwen2 =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

const std::vector<std::string> kTexts = {
    "Hello world",
    "  leading and trailing   ",
    "I'm sure they'LL say it's FINE, isn't it?",
    "123456789 and 12.5% of 1,000,000",
    "tabs\tand\nnewlines\r\n\n  indented\n\n\n",
    "mixed: \xE4\xB8\xAD\xE6\x96\x87 text, \xD9\xA1\xD9\xA2\xD9\xA3 digits, caf\xC3\xA9, \xCE\xB1\xCE\xB2\xCE\xB3!",
    "emoji \xF0\x9F\x98\x80\xF0\x9F\x98\x81 and symbols @#$%^&*() ---> <= >=",
    "code: for (int i = 0; i < n; ++i) { x[i] += y[i]; }",
    "   \n   \t  ",
    "a\xE3\x80\x80" "b \xC2\xA0 c",  // ideographic and no-break spaces
};

TEST(WordSplitter, HandMatchersGiveTheirRegexesWords) {
  struct Case {
    PreTokenizer kind;
    std::string_view regex;
  };
  for (const Case& c : {Case{PreTokenizer::kGpt2, kGpt2}, Case{PreTokenizer::kLlama3, kLlama3},
                        Case{PreTokenizer::kQwen2, kQwen2}})
    for (const std::string& text : kTexts) {
      std::vector<WordSpan> spans;
      pre_tokenize(c.kind, text, spans);
      EXPECT_EQ(words_of(spans, text), regex_words({c.regex}, text)) << c.regex << " on '" << text << "'";
    }
}

}  // namespace
}  // namespace pagoda

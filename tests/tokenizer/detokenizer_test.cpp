#include <gtest/gtest.h>

#include "test_vocabs.h"
#include "text/utf8.h"

namespace pagoda {
namespace {

using test::id_of;
using test::make;
using test::spm_vocab;

constexpr int32_t byte_id(int b) { return 3 + b; }  // spm_vocab's byte tokens

TEST(Utf8, DecodeRejectsMalformedSequences) {
  EXPECT_EQ(utf8::decode("\xF0\x9F\x98\x80", 0).cp, 0x1F600u);
  EXPECT_EQ(utf8::decode("\xF0\x9F\x98\x80", 0).len, 4u);
  for (std::string_view bad : {"\x80", "\xC0\xAF", "\xED\xA0\x80", "\xF4\x90\x80\x80",
                               "\xE4\xB8", "\xF0\x9F\x98", "\xFF"}) {
    EXPECT_EQ(utf8::decode(bad, 0).cp, utf8::kInvalid) << testing::PrintToString(bad);
    EXPECT_EQ(utf8::decode(bad, 0).len, 1u);
  }
}

TEST(Utf8, CompletePrefixHoldsOnlyCompletableTails) {
  EXPECT_EQ(utf8::complete_prefix("ab"), 2u);
  EXPECT_EQ(utf8::complete_prefix("a\xF0\x9F\x98"), 1u);   // emoji missing its last byte
  EXPECT_EQ(utf8::complete_prefix("a\xF0\x9F\x98\x80"), 5u);
  EXPECT_EQ(utf8::complete_prefix("a\xE4"), 1u);
  EXPECT_EQ(utf8::complete_prefix("a\xE4" "b"), 3u);       // can never complete
  EXPECT_EQ(utf8::complete_prefix("a\xED\xA0"), 3u);       // would be a surrogate
  EXPECT_EQ(utf8::complete_prefix("a\x80"), 2u);           // stray continuation byte
}

TEST(IncrementalDetokenizer, EmojiSplitAcrossByteTokensComesOutWhole) {
  Vocab v = spm_vocab({{"a", -1}});
  auto tok = make(v);
  IncrementalDetokenizer d(*tok);
  const int32_t a = id_of(v, "a");
  EXPECT_EQ(d.push(a), "a");
  // 😀 = F0 9F 98 80, then 中 = E4 B8 AD, each spelled as byte tokens.
  EXPECT_EQ(d.push(byte_id(0xF0)), "");
  EXPECT_EQ(d.push(byte_id(0x9F)), "");
  EXPECT_EQ(d.push(byte_id(0x98)), "");
  EXPECT_EQ(d.push(byte_id(0x80)), "\xF0\x9F\x98\x80");
  EXPECT_EQ(d.push(byte_id(0xE4)), "");
  EXPECT_EQ(d.push(byte_id(0xB8)), "");
  EXPECT_EQ(d.push(byte_id(0xAD)), "\xE4\xB8\xAD");
  EXPECT_EQ(d.flush(), "");
}

TEST(IncrementalDetokenizer, FlushReturnsUnfinishedTail) {
  Vocab v = spm_vocab({{"a", -1}});
  auto tok = make(v);
  IncrementalDetokenizer d(*tok);
  EXPECT_EQ(d.push(id_of(v, "a")), "a");
  EXPECT_EQ(d.push(byte_id(0xF0)), "");
  EXPECT_EQ(d.push(byte_id(0x9F)), "");
  EXPECT_EQ(d.flush(), "\xF0\x9F");
  EXPECT_EQ(d.flush(), "");
}

TEST(IncrementalDetokenizer, InvalidBytesAreNotHeldBack) {
  Vocab v = spm_vocab({{"a", -1}});
  auto tok = make(v);
  IncrementalDetokenizer d(*tok);
  EXPECT_EQ(d.push(byte_id(0xE4)), "");
  // 'a' proves E4 can never complete, so both go out at once.
  EXPECT_EQ(d.push(id_of(v, "a")), "\xE4" "a");
  EXPECT_EQ(d.push(byte_id(0xFF)), "\xFF");
}

TEST(IncrementalDetokenizer, MatchesDecodeIncludingLeadingSpace) {
  const std::string sp = "\xE2\x96\x81";
  Vocab v = spm_vocab({{sp + "hi", -1}, {sp + "you", -2}});
  auto tok = make(v);
  const std::vector<int32_t> ids = {1, id_of(v, sp + "hi"), id_of(v, sp + "you")};
  IncrementalDetokenizer d(*tok);
  std::string streamed;
  for (int32_t id : ids) streamed += d.push(id);
  streamed += d.flush();
  EXPECT_EQ(streamed, tok->decode(ids));
  EXPECT_EQ(streamed, "hi you");
  // Continuing after a prompt keeps the space that separates it from the prompt.
  IncrementalDetokenizer cont(*tok, /*at_text_start=*/false);
  EXPECT_EQ(cont.push(id_of(v, sp + "hi")), " hi");
}

}  // namespace
}  // namespace pagoda

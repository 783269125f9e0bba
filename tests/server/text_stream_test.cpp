// TextStream: generated tokens to API text, cut before stop strings, with a tail that may
// still become a stop string held back (so streamed text never shows part of one), and
// never half a UTF-8 character.
#include "server/text_stream.h"

#include <gtest/gtest.h>

#include "tokenizer/test_vocabs.h"

namespace pagoda {
namespace {

// Byte tokens are ids 3 + byte in the SentencePiece test vocabulary.
int32_t byte_tok(unsigned char b) { return 3 + b; }

std::string feed(TextStream& ts, const std::string& text, std::vector<std::string>* deltas = nullptr) {
  std::string out;
  for (unsigned char c : text) {
    std::string d = ts.push(byte_tok(c), false);
    if (deltas) deltas->push_back(d);
    out += d;
    if (ts.stopped()) break;
  }
  return out + ts.finish();
}

TEST(TextStream, WithoutStopsEveryByteComesThrough) {
  auto tok = test::make(test::spm_vocab({}));
  TextStream ts(*tok, {});
  EXPECT_EQ(feed(ts, "hello, world"), "hello, world");
  EXPECT_FALSE(ts.stopped());
}

TEST(TextStream, CutsBeforeTheStopStringAndStops) {
  auto tok = test::make(test::spm_vocab({}));
  TextStream ts(*tok, {"END", "\n\n"});
  EXPECT_EQ(feed(ts, "abc ENDxyz"), "abc ");
  EXPECT_TRUE(ts.stopped());
  EXPECT_EQ(ts.push(byte_tok('q'), false), "");
}

TEST(TextStream, HoldsBackAPossibleStopPrefixUntilItCannotBeOne) {
  auto tok = test::make(test::spm_vocab({}));
  TextStream ts(*tok, {"STOP"});
  std::vector<std::string> d;
  EXPECT_EQ(feed(ts, "aSTxSTO", &d), "aSTxSTO");
  // "S", "ST" held; "x" releases "STx"; "STO" held to the end.
  EXPECT_EQ(d, (std::vector<std::string>{"a", "", "", "STx", "", "", ""}));
}

TEST(TextStream, EarliestOfSeveralStopStringsWins) {
  auto tok = test::make(test::spm_vocab({}));
  TextStream ts(*tok, {"cd", "bcde"});
  EXPECT_EQ(feed(ts, "abcdef"), "ab");
}

TEST(TextStream, NeverSplitsAUtf8Character) {
  auto tok = test::make(test::spm_vocab({}));
  TextStream ts(*tok, {});
  std::vector<std::string> d;
  feed(ts, "\xC3\xA9!", &d);  // é, then !
  EXPECT_EQ(d, (std::vector<std::string>{"", "\xC3\xA9", "!"}));
}

TEST(TextStream, EndOfGenerationTokensAddNoText) {
  auto tok = test::make(test::spm_vocab({}));
  TextStream ts(*tok, {});
  EXPECT_EQ(ts.push(2, true), "");
}

}  // namespace
}  // namespace pagoda

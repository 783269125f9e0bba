// OutputProcessor: generated tokens to the text a caller sees, cut before stop strings,
// with a tail that may still become a stop string held back (so streamed text never
// shows part of one), never half a UTF-8 character, and the end of generation decided
// by end-of-generation tokens, stop ids, stop strings and the length limit.
#include "engine/output_processor.h"

#include <gtest/gtest.h>

#include "tokenizer/test_vocabs.h"

namespace pagoda {
namespace {

// Byte tokens are ids 3 + byte in the SentencePiece test vocabulary; 2 is its EOS.
int32_t byte_tok(unsigned char b) { return 3 + b; }
constexpr int32_t kEos = 2;

struct Fed {
  std::string text;
  std::vector<std::string> deltas;
  FinishReason finish = FinishReason::kNone;
  std::string stop_string;
  size_t tokens = 0;  // pushed before the processor ended the sample
};

// Pushes the bytes of `text` as tokens, the last one at the length limit.
Fed feed(OutputProcessor& out, const std::string& text) {
  Fed f;
  for (size_t i = 0; i < text.size() && f.finish == FinishReason::kNone; ++i) {
    OutputProcessor::Update u = out.push(byte_tok(static_cast<unsigned char>(text[i])), i + 1 == text.size());
    f.deltas.push_back(u.text);
    f.text += u.text;
    f.finish = u.finish;
    f.stop_string = u.stop_string;
    ++f.tokens;
  }
  return f;
}

RequestParams with_stops(std::vector<std::string> stops) {
  RequestParams p;
  p.stop = std::move(stops);
  return p;
}

TEST(OutputProcessor, WithoutStopsEveryByteComesThroughAndLengthEndsIt) {
  auto tok = test::make(test::spm_vocab({}));
  RequestParams p;
  OutputProcessor out(tok.get(), p);
  const Fed f = feed(out, "hello, world");
  EXPECT_EQ(f.text, "hello, world");
  EXPECT_EQ(f.finish, FinishReason::kLength);
  EXPECT_TRUE(f.stop_string.empty());
}

TEST(OutputProcessor, CutsBeforeTheStopStringAndEndsTheSampleThere) {
  auto tok = test::make(test::spm_vocab({}));
  const RequestParams p = with_stops({"END", "\n\n"});
  OutputProcessor out(tok.get(), p);
  const Fed f = feed(out, "abc ENDxyz");
  EXPECT_EQ(f.text, "abc ");
  EXPECT_EQ(f.finish, FinishReason::kStop);
  EXPECT_EQ(f.stop_string, "END");
  EXPECT_EQ(f.tokens, 7u);  // ends at the D, not at the length limit
  EXPECT_EQ(out.push(byte_tok('q'), false).text, "");
}

TEST(OutputProcessor, HoldsBackAPossibleStopPrefixUntilItCannotBeOne) {
  auto tok = test::make(test::spm_vocab({}));
  const RequestParams p = with_stops({"STOP"});
  OutputProcessor out(tok.get(), p);
  const Fed f = feed(out, "aSTxSTO");
  // "S", "ST" held; "x" releases "STx"; "STO" held until the length limit releases it.
  EXPECT_EQ(f.deltas, (std::vector<std::string>{"a", "", "", "STx", "", "", "STO"}));
  EXPECT_EQ(f.finish, FinishReason::kLength);
}

TEST(OutputProcessor, EarliestOfSeveralStopStringsWins) {
  auto tok = test::make(test::spm_vocab({}));
  const RequestParams p = with_stops({"cd", "bcde"});
  OutputProcessor out(tok.get(), p);
  const Fed f = feed(out, "abcdef");
  EXPECT_EQ(f.text, "ab");
  EXPECT_EQ(f.stop_string, "cd");
}

TEST(OutputProcessor, NeverSplitsAUtf8Character) {
  auto tok = test::make(test::spm_vocab({}));
  RequestParams p;
  OutputProcessor out(tok.get(), p);
  const Fed f = feed(out, "\xC3\xA9!");  // é, then !
  EXPECT_EQ(f.deltas, (std::vector<std::string>{"", "\xC3\xA9", "!"}));
}

TEST(OutputProcessor, EndOfGenerationAddsNoTextAndReleasesWhatIsHeld) {
  auto tok = test::make(test::spm_vocab({}));
  const RequestParams p = with_stops({"xyz"});
  OutputProcessor out(tok.get(), p);
  EXPECT_EQ(out.push(byte_tok('a'), false).text, "a");
  EXPECT_EQ(out.push(byte_tok('x'), false).text, "");
  const OutputProcessor::Update u = out.push(kEos, false);
  EXPECT_EQ(u.text, "x");
  EXPECT_EQ(u.finish, FinishReason::kStop);
}

TEST(OutputProcessor, IgnoreEosKeepsGoing) {
  auto tok = test::make(test::spm_vocab({}));
  RequestParams p;
  p.ignore_eos = true;
  OutputProcessor out(tok.get(), p);
  EXPECT_EQ(out.push(kEos, false).finish, FinishReason::kNone);
}

TEST(OutputProcessor, StopTokenIdEndsTheSampleWithItsText) {
  auto tok = test::make(test::spm_vocab({}));
  RequestParams p;
  p.stop_token_ids = {byte_tok('!')};
  OutputProcessor out(tok.get(), p);
  const Fed f = feed(out, "hi!there");
  EXPECT_EQ(f.text, "hi!");
  EXPECT_EQ(f.finish, FinishReason::kStop);
  EXPECT_TRUE(f.stop_string.empty());
}

TEST(OutputProcessor, WithoutATokenizerOnlyTokenRulesApply) {
  RequestParams p;
  p.stop_token_ids = {7};
  OutputProcessor out(nullptr, p);
  EXPECT_EQ(out.push(5, false).finish, FinishReason::kNone);
  EXPECT_EQ(out.push(5, true).finish, FinishReason::kLength);
  OutputProcessor again(nullptr, p);
  const OutputProcessor::Update u = again.push(7, false);
  EXPECT_EQ(u.finish, FinishReason::kStop);
  EXPECT_TRUE(u.text.empty());
}

}  // namespace
}  // namespace pagoda

// The SentencePiece model reader on hand-built protobuf bytes: pieces, scores and types
// come back; other fields are skipped; damage (truncation anywhere, a bad type, an
// overlong varint, text that is not a model) is an error, never a crash.
#include "convert/hf_sentencepiece.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace pagoda {
namespace {

void varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}

std::string piece_msg(const std::string& text, float score, int type) {
  std::string m;
  varint(m, (1 << 3) | 2);
  varint(m, text.size());
  m += text;
  varint(m, (2 << 3) | 5);
  char b[4];
  std::memcpy(b, &score, 4);
  m.append(b, 4);
  if (type != 0) {
    varint(m, (3 << 3) | 0);
    varint(m, static_cast<uint64_t>(type));
  }
  return m;
}

std::string model(const std::vector<std::string>& pieces) {
  std::string m;
  for (const std::string& p : pieces) {
    varint(m, (1 << 3) | 2);
    varint(m, p.size());
    m += p;
  }
  // A trainer_spec-like field (2, length-delimited) and a varint field: skipped.
  varint(m, (2 << 3) | 2);
  varint(m, 3);
  m += "abc";
  varint(m, (7 << 3) | 0);
  varint(m, 300);
  return m;
}

Result<std::vector<SpmPiece>> parse(const std::string& s) {
  return parse_sentencepiece_model(reinterpret_cast<const uint8_t*>(s.data()), s.size(), "t.model");
}

TEST(SentencePieceModel, ReadsPiecesScoresAndTypes) {
  const std::string m = model({piece_msg("<unk>", 0.0f, 2), piece_msg("\xe2\x96\x81the", -3.5f, 0),
                               piece_msg("<0x0A>", 0.0f, 6), piece_msg("<start_of_turn>", 0.0f, 3)});
  auto r = parse(m);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  ASSERT_EQ(r->size(), 4u);
  EXPECT_EQ((*r)[0].piece, "<unk>");
  EXPECT_EQ((*r)[0].type, 2);
  EXPECT_EQ((*r)[1].piece, "\xe2\x96\x81the");
  EXPECT_EQ((*r)[1].score, -3.5f);
  EXPECT_EQ((*r)[1].type, 1);  // absent: NORMAL, protobuf's default for the field
  EXPECT_EQ((*r)[2].type, 6);
  EXPECT_EQ((*r)[3].type, 3);
}

TEST(SentencePieceModel, EveryTruncationIsAnErrorOrAShorterModel) {
  const std::string m = model({piece_msg("a", 1.0f, 1), piece_msg("bc", 2.0f, 4)});
  for (size_t n = 0; n < m.size(); ++n) {
    auto r = parse(m.substr(0, n));
    if (r.is_ok()) {
      EXPECT_LE(r->size(), 2u);  // a cut between two fields is a valid, shorter message
    }
  }
}

TEST(SentencePieceModel, DamageIsAnError) {
  EXPECT_FALSE(parse("").is_ok());  // no pieces
  EXPECT_FALSE(parse(model({piece_msg("a", 0.0f, 9)})).is_ok());  // no such type
  EXPECT_FALSE(parse(std::string(11, '\xff')).is_ok());             // a varint of more than 10 bytes
  std::string long_len;
  varint(long_len, (1 << 3) | 2);
  varint(long_len, 1000);
  long_len += "short";
  EXPECT_FALSE(parse(long_len).is_ok());
  // Llama 3's tokenizer.model is a tiktoken text file: base64 pieces and ranks.
  auto tiktoken = parse("IQ== 0\nIg== 1\nIw== 2\nJA== 3\n");
  ASSERT_FALSE(tiktoken.is_ok());
  EXPECT_NE(tiktoken.status().message().find("not a SentencePiece model"), std::string::npos);
}

}  // namespace
}  // namespace pagoda

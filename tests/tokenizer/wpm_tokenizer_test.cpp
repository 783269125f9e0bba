// WordPiece (BERT) on a small hand-made vocabulary; llama.cpp's bert-bge vocabulary test
// (test_llamacpp_vocab_files.py) is the oracle at scale.
#include <gtest/gtest.h>

#include "test_vocabs.h"

namespace pagoda {
namespace {

using test::id_of;
using test::make;
using Ids = std::vector<int32_t>;

const std::string kMark = "\xE2\x96\x81";  // "▁": word-initial pieces

Vocab bert_vocab() {
  Vocab v;
  v.kind = TokenizerKind::kWordPiece;
  v.pieces = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", kMark + "hello", kMark + "un", "aff", "able", kMark + ",",
              kMark + "!", kMark + "cafe", kMark + "\xE4\xB8\xAD", kMark + "\xE6\x96\x87", kMark + "world"};
  v.types.assign(v.pieces.size(), TokenType::kNormal);
  for (int i = 0; i < 4; ++i) v.types[i] = TokenType::kControl;
  v.unk = 1;
  v.bos = 2;
  v.eos = 3;
  v.add_bos = v.add_eos = true;
  v.add_space_prefix = true;  // as Vocab::from_gguf sets it for WordPiece
  return v;
}

TEST(WpmTokenizer, GreedyLongestPiecesWithinAWord) {
  const Vocab v = bert_vocab();
  auto tok = make(v);
  EXPECT_EQ(tok->encode("unaffable", false, false),
            (Ids{id_of(v, kMark + "un"), id_of(v, "aff"), id_of(v, "able")}));
}

TEST(WpmTokenizer, LowercasesStripsAccentsAndSplitsPunctuationAndCjk) {
  const Vocab v = bert_vocab();
  auto tok = make(v);
  EXPECT_EQ(tok->encode("HeLLo,  Caf\xC3\xA9!\t\xE4\xB8\xAD\xE6\x96\x87", false, false),
            (Ids{id_of(v, kMark + "hello"), id_of(v, kMark + ","), id_of(v, kMark + "cafe"), id_of(v, kMark + "!"),
                 id_of(v, kMark + "\xE4\xB8\xAD"), id_of(v, kMark + "\xE6\x96\x87")}));
}

TEST(WpmTokenizer, AWordNoPiecesCoverIsUnknownWhole) {
  const Vocab v = bert_vocab();
  auto tok = make(v);
  // "unaffablex": "x" has no piece, so the whole word (not just "x") is [UNK].
  EXPECT_EQ(tok->encode("hello unaffablex world", false, false),
            (Ids{id_of(v, kMark + "hello"), 1, id_of(v, kMark + "world")}));
}

TEST(WpmTokenizer, AddSpecialFramesWithClsAndSep) {
  const Vocab v = bert_vocab();
  auto tok = make(v);
  EXPECT_EQ(tok->encode("hello", true, false), (Ids{2, id_of(v, kMark + "hello"), 3}));
  EXPECT_EQ(tok->decode({2, id_of(v, kMark + "hello"), id_of(v, kMark + "world"), 3}), "hello world");
}

TEST(WpmTokenizer, CasedVocabularyKeepsCaseAndAccents) {
  Vocab v = bert_vocab();
  v.lowercase = v.strip_accents = false;
  v.pieces.push_back(kMark + "Caf\xC3\xA9");
  v.types.push_back(TokenType::kNormal);
  auto tok = make(v);
  EXPECT_EQ(tok->encode("Caf\xC3\xA9 hello", false, false),
            (Ids{static_cast<int32_t>(v.pieces.size() - 1), id_of(v, kMark + "hello")}));
  EXPECT_EQ(tok->encode("HELLO", false, false), (Ids{1}));
}

}  // namespace
}  // namespace pagoda

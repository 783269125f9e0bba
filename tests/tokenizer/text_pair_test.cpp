// A text pair framed as llama.cpp's rerank prompt and Hugging Face's pair template frame
// it, on a hand-made WordPiece vocabulary: BERT's [CLS] a [SEP] b [SEP] with the second
// text starting after the first [SEP]; RoBERTa's extra separator; the separator standing in
// for a missing EOS; special-token text in a document read as its token.
#include <gtest/gtest.h>

#include "test_vocabs.h"
#include "tokenizer/text_pair.h"

namespace pagoda {
namespace {

using test::id_of;
using test::make;
using Ids = std::vector<int32_t>;

const std::string kMark = "\xE2\x96\x81";

Vocab pair_vocab() {
  Vocab v;
  v.kind = TokenizerKind::kWordPiece;
  v.pieces = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", kMark + "what", kMark + "is", kMark + "paris", kMark + "?",
              kMark + "a", kMark + "city"};
  v.types.assign(v.pieces.size(), TokenType::kNormal);
  for (int i = 0; i < 4; ++i) v.types[i] = TokenType::kControl;
  v.unk = 1;
  v.bos = 2;
  v.eos = 3;
  v.sep = 3;
  v.add_bos = v.add_eos = true;
  v.add_space_prefix = true;
  return v;
}

TEST(TextPair, BertFramesClsFirstSepSecondSep) {
  const Vocab v = pair_vocab();
  auto tok = make(v);
  const TextPair p = encode_text_pair(*tok, "what is paris?", "a city");
  const int32_t what = id_of(v, kMark + "what"), is = id_of(v, kMark + "is"), paris = id_of(v, kMark + "paris"),
                q = id_of(v, kMark + "?"), a = id_of(v, kMark + "a"), city = id_of(v, kMark + "city");
  EXPECT_EQ(p.ids, (Ids{2, what, is, paris, q, 3, a, city, 3}));
  EXPECT_EQ(p.second, 6) << "type 1 starts at the document's first token, after the first [SEP]";
}

TEST(TextPair, AddSepPutsASecondSeparatorBeforeTheSecondText) {
  Vocab v = pair_vocab();
  v.add_sep = true;
  auto tok = make(v);
  const TextPair p = encode_text_pair(*tok, "paris", "city");
  EXPECT_EQ(p.ids, (Ids{2, id_of(v, kMark + "paris"), 3, 3, id_of(v, kMark + "city"), 3}));
  EXPECT_EQ(p.second, 4);
}

TEST(TextPair, TheSeparatorStandsInForAMissingEosAndFlagsAreObeyed) {
  Vocab v = pair_vocab();
  v.eos = -1;
  auto tok = make(v);
  EXPECT_EQ(encode_text_pair(*tok, "a", "city").ids, (Ids{2, id_of(v, kMark + "a"), 3, id_of(v, kMark + "city"), 3}));
  v.add_bos = false;
  v.add_eos = false;
  auto bare = make(v);
  const TextPair p = encode_text_pair(*bare, "a", "city");
  EXPECT_EQ(p.ids, (Ids{id_of(v, kMark + "a"), id_of(v, kMark + "city")}));
  EXPECT_EQ(p.second, 1);
}

TEST(TextPair, SpecialTokenTextInADocumentIsItsToken) {
  const Vocab v = pair_vocab();
  auto tok = make(v);
  const TextPair p = encode_text_pair(*tok, "a", "paris [SEP] city");
  EXPECT_EQ(p.ids, (Ids{2, id_of(v, kMark + "a"), 3, id_of(v, kMark + "paris"), 3, id_of(v, kMark + "city"), 3}));
  EXPECT_EQ(p.second, 3);
}

}  // namespace
}  // namespace pagoda

// Which draft models may draft for a target: llama.cpp's vocabulary rules, each failure
// named by its first difference.
#include "engine/draft_model.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>

// GCC 12 at -O3 reports impossible overlaps in inlined std::string copies (GCC bug 105329).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wrestrict"
#endif

namespace pagoda {
namespace {

Vocab vocab(int32_t n) {
  Vocab v;
  v.kind = TokenizerKind::kByteLevelBpe;
  for (int32_t i = 0; i < n; ++i) {
    v.pieces.push_back("t" + std::to_string(i));
  }
  v.bos = 1;
  v.eos = 2;
  return v;
}

std::string refusal(const Vocab& target, const Vocab& draft) {
  const Status st = check_draft_vocabulary(target, draft);
  return st.is_ok() ? std::string() : st.message();
}

TEST(DraftVocabulary, SameTokensFromIdFiveOnAreAccepted) {
  const Vocab t = vocab(1000);
  Vocab d = vocab(1000);
  EXPECT_EQ(refusal(t, d), "");
  d.pieces[3] = "<other special>";  // ids below 5 are numbered differently across families
  EXPECT_EQ(refusal(t, d), "");
  d.pieces.resize(900);  // a few added tokens more or less are tolerated
  EXPECT_EQ(refusal(t, d), "");
}

TEST(DraftVocabulary, RefusalsNameTheFirstDifference) {
  const Vocab t = vocab(1000);
  Vocab d = vocab(1000);
  d.pieces[17] = "x";
  EXPECT_NE(refusal(t, d).find("token 17 is \"x\" in the draft model's vocabulary but \"t17\""), std::string::npos)
      << refusal(t, d);
  d = vocab(1200);
  EXPECT_NE(refusal(t, d).find("1200 tokens, the target's 1000"), std::string::npos) << refusal(t, d);
  d = vocab(1000);
  d.kind = TokenizerKind::kSentencePiece;
  EXPECT_NE(refusal(t, d).find("tokenizer is llama, the target's gpt2"), std::string::npos) << refusal(t, d);
  d = vocab(1000);
  d.eos = 7;
  EXPECT_NE(refusal(t, d).find("EOS 7 vs 2"), std::string::npos) << refusal(t, d);
  d = vocab(1000);
  d.add_bos = true;
  EXPECT_NE(refusal(t, d).find("add_bos true vs false"), std::string::npos) << refusal(t, d);
}

}  // namespace
}  // namespace pagoda

// SentencePiece Unigram over a GGUF "t5" vocabulary (T5, mT5, Flan-T5, UMT5), as
// llama.cpp's UGM tokenizer does it. Each stretch of plain text is normalized first:
// user-defined pieces are copied as they are, the precompiled charsmap replaces the
// longest prefix it knows (NFKC and friends), other characters pass unchanged (a byte
// that does not start a character becomes U+FFFD); spaces then become "▁", runs of them
// collapse when remove_extra_whitespaces is set, and add_space_prefix puts one before
// the first word. The normalized text is cut by Viterbi into the pieces whose scores
// sum highest (user-defined pieces score 0); a character no piece covers becomes the
// unknown token, at the lowest normal score minus 10, and neighbouring unknowns are
// one token. There is no byte fallback: llama.cpp gives <unk> where sentencepiece's
// byte_fallback would spell bytes (byte pieces still decode to their byte).
// Internal to the tokenizer module; use Tokenizer::create.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/piece_trie.h"
#include "tokenizer/precompiled_charsmap.h"
#include "tokenizer/special_tokens.h"
#include "tokenizer/tokenizer.h"

namespace pagoda {

class UgmTokenizer final : public Tokenizer {
 public:
  static Result<std::unique_ptr<Tokenizer>> make(Vocab vocab);

  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const override;

 private:
  struct Best;  // one lattice position of the Viterbi search
  UgmTokenizer(Vocab vocab, PrecompiledCharsmap charsmap);
  std::string text_piece_bytes(const std::string& piece) const override;
  void normalize(std::string_view text, std::string& out) const;
  // The replacement for the input at text[pos] and how many bytes it consumes.
  std::pair<std::string_view, size_t> normalize_prefix(std::string_view text, size_t pos) const;
  void viterbi(const std::string& normalized, std::vector<Best>& lattice, std::vector<int32_t>& out) const;
  double score(int32_t id) const;

  PrecompiledCharsmap charsmap_;
  PieceTrie pieces_;        // normal, user-defined and unused pieces
  PieceTrie user_defined_;  // user-defined pieces, copied unnormalized
  SpecialTokenMatcher special_;
  float unknown_score_ = 0;
};

}  // namespace pagoda

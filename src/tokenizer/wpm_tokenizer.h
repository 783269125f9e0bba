// WordPiece over a GGUF "bert" vocabulary (BERT, BGE, MiniLM embedding models), as
// llama.cpp and Hugging Face's BertNormalizer + BertPreTokenizer + WordPiece do it: the
// text is cleaned (control characters dropped), lowercased and stripped of accents when
// the vocabulary says so (tokenizer.ggml.normalizer.*, both on by default), split at
// whitespace, around punctuation and around CJK ideographs, and each word is cut
// greedily into the longest pieces the vocabulary has. GGUF writes word-initial pieces
// with a leading "▁" and continuation pieces bare (Hugging Face's "##" removed); a word
// that cannot be cut completely becomes the unknown token. Internal; use
// Tokenizer::create.
#pragma once

#include <memory>

#include "tokenizer/piece_index.h"
#include "tokenizer/special_tokens.h"
#include "tokenizer/tokenizer.h"

namespace pagoda {

class WpmTokenizer final : public Tokenizer {
 public:
  static Result<std::unique_ptr<Tokenizer>> make(Vocab vocab);

  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const override;

 private:
  std::string text_piece_bytes(const std::string& piece) const override;
  explicit WpmTokenizer(Vocab vocab);
  void encode_text(std::string_view text, std::vector<int32_t>& out) const;
  void encode_word(const std::string& word, std::vector<int32_t>& out) const;

  PieceIndex index_;
  SpecialTokenMatcher special_;
  size_t max_piece_bytes_ = 0;
};

}  // namespace pagoda

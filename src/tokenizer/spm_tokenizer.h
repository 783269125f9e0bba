// SentencePiece-style BPE over a GGUF "llama" vocabulary (Llama 2, Gemma): spaces are
// escaped as "▁", adjacent pieces are merged best-score-first while the merged text is
// itself a piece, and characters with no piece fall back to <0xAB> byte tokens.
// Internal to the tokenizer module; use Tokenizer::create.
#pragma once

#include <array>
#include <memory>

#include "tokenizer/piece_index.h"
#include "tokenizer/special_tokens.h"
#include "tokenizer/tokenizer.h"

namespace pagoda {

class SpmTokenizer final : public Tokenizer {
 public:
  static Result<std::unique_ptr<Tokenizer>> make(Vocab vocab);

  std::vector<int32_t> encode(std::string_view text, bool add_special,
                              bool parse_special) const override;
  std::vector<int32_t> encode_continuation(std::string_view text) const override;

 private:
  // starts_input: the text begins the input, so its first word gets the dummy prefix.
  std::vector<int32_t> encode_from(std::string_view text, bool add_special, bool parse_special,
                                   bool starts_input) const;
  std::string text_piece_bytes(const std::string& piece) const override;
  explicit SpmTokenizer(Vocab vocab);
  // Tokenizes one stretch of plain text (no special tokens inside).
  void encode_text(std::string_view text, bool space_prefix, std::vector<int32_t>& out) const;
  void emit_symbol(std::string_view piece, std::vector<int32_t>& out) const;
  float score(int32_t id) const { return vocab_.scores.empty() ? 0.0f : vocab_.scores[id]; }

  PieceIndex index_;
  SpecialTokenMatcher special_;
  std::array<int32_t, 256> byte_token_;  // <0xAB> token per byte, -1 where missing
};

}  // namespace pagoda

// Byte-level BPE over a GGUF "gpt2" vocabulary (Llama 3, Qwen2, GPT-2): text is split
// into words by the pre-tokenizer named in tokenizer.ggml.pre, each word's bytes are
// mapped to GPT-2's printable alphabet, and adjacent symbols are merged lowest merge
// rank first. Merging works on token ids (every symbol is a token), so the merge table
// is keyed by id pairs rather than strings. Internal; use Tokenizer::create.
#pragma once

#include <array>
#include <memory>
#include <unordered_map>

#include "tokenizer/piece_index.h"
#include "tokenizer/word_splitter.h"
#include "tokenizer/special_tokens.h"
#include "tokenizer/tokenizer.h"

namespace pagoda {

class BpeTokenizer final : public Tokenizer {
 public:
  static Result<std::unique_ptr<Tokenizer>> make(Vocab vocab);

  std::vector<int32_t> encode(std::string_view text, bool add_special,
                              bool parse_special) const override;

 private:
  std::string text_piece_bytes(const std::string& piece) const override;
  BpeTokenizer(Vocab vocab, WordSplitter pre);
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;
  void push_token(int32_t id, std::vector<int32_t>& out) const;

  struct Merge {
    int32_t rank;
    int32_t result;
  };
  static uint64_t pair_key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }

  WordSplitter pre_;
  // Llama 3's tokenizer (tiktoken) looks a whole word up before merging; a few words
  // that are tokens are not reachable by the merges, so this changes results.
  bool ignore_merges_;
  // Gemma 4's BPE: spaces become "▁", symbols are UTF-8 characters rather than GPT-2's
  // byte alphabet, and bytes without a piece fall back to <0xAB> tokens.
  bool raw_utf8_;
  PieceIndex index_;
  SpecialTokenMatcher special_;
  std::array<int32_t, 256> byte_token_;  // the piece of each byte (its GPT-2 character, or <0xAB>)
  std::unordered_map<uint64_t, Merge> merges_;
};

}  // namespace pagoda

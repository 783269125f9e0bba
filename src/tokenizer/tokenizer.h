// Text <-> token ids for the tokenizer families in GGUF files: SentencePiece-style BPE
// with byte fallback (tokenizer.ggml.model = "llama": Llama 2, Gemma), byte-level BPE
// with a pre-tokenizer ("gpt2": Llama 3, Qwen2 and the 88 tokenizer.ggml.pre names of
// pre_tokenizer_table.cpp), WordPiece ("bert": BERT-style embedding models) and
// SentencePiece Unigram ("t5": T5, mT5, Flan-T5). Immutable after construction, so one
// instance may be shared across threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "tokenizer/vocab.h"

namespace pagoda {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  static Result<std::unique_ptr<Tokenizer>> create(Vocab vocab);
  static Result<std::unique_ptr<Tokenizer>> from_gguf(const GgufFile& file);

  // add_special: add BOS/EOS as the vocabulary's add_bos/add_eos keys say.
  // parse_special: text like "<start_of_turn>" becomes its control token instead of
  // being tokenized as plain characters. Invalid UTF-8 in `text` never fails: bytes
  // are encoded with byte fallback (SPM) or as raw bytes (byte-level BPE); Unigram
  // reads each as U+FFFD, as llama.cpp and sentencepiece do.
  virtual std::vector<int32_t> encode(std::string_view text, bool add_special,
                                      bool parse_special) const = 0;

  // `text` as it would be tokenized in the middle of a sequence, after earlier text: no
  // BOS/EOS, special tokens parsed, and no dummy space prefix before its first word (SPM
  // adds one to an input's start). Used for text appended to a generation (a grammar's
  // forced text). Unigram keeps encode's behaviour.
  virtual std::vector<int32_t> encode_continuation(std::string_view text) const {
    return encode(text, /*add_special=*/false, /*parse_special=*/true);
  }

  // The bytes a token stands for when it appears in generated text (SPM "▁" becomes a
  // space, <0xAB> becomes the byte 0xAB, byte-level BPE characters map back to bytes;
  // control tokens give "" unless render_special).
  std::string token_to_bytes(int32_t id, bool render_special = false) const;

  // Concatenated bytes of the tokens; a leading space from add_space_prefix is removed
  // from the first token that has bytes (Unigram: from the very first token only, as
  // llama.cpp does, so "</s>" then "▁hi" keeps its space; sentencepiece would drop it).
  std::string decode(const std::vector<int32_t>& ids, bool render_special = false) const;
  bool strips_first_token_only() const { return vocab_.kind == TokenizerKind::kUnigram; }

  const Vocab& vocab() const { return vocab_; }
  int32_t vocab_size() const { return static_cast<int32_t>(vocab_.pieces.size()); }
  bool is_eog(int32_t id) const;

 protected:
  explicit Tokenizer(Vocab vocab) : vocab_(std::move(vocab)) {}
  // The bytes of a text piece (token_to_bytes has handled ids out of range, control,
  // unknown and byte tokens): each tokenizer family spells spaces and bytes its own way.
  virtual std::string text_piece_bytes(const std::string& piece) const = 0;
  Vocab vocab_;
};

// Turns a stream of token ids into text without ever emitting part of a UTF-8 character:
// bytes of an incomplete sequence are held until it completes (or flushed as-is at the
// end). The SentencePiece leading space of the first token is dropped like decode()
// when the stream starts the text; a stream that continues a prompt (generated tokens)
// passes at_text_start = false and keeps it. Invalid bytes that no later byte could
// complete are passed through as they are.
class IncrementalDetokenizer {
 public:
  explicit IncrementalDetokenizer(const Tokenizer& tok, bool at_text_start = true)
      : tok_(tok), first_(at_text_start) {}
  // Returns the text that became complete with this token (possibly empty).
  std::string push(int32_t id);
  // Whatever is still held (an incomplete character at the end of the stream).
  std::string flush();

 private:
  const Tokenizer& tok_;
  std::string pending_;
  bool first_;
};

}  // namespace pagoda

// A tokenizer vocabulary as GGUF stores it (tokenizer.ggml.*): pieces, scores, token
// types, merges and special-token ids. Built from a GgufFile or directly by tests.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace pagoda {

class GgufFile;

// Token types, numbered as in GGUF (tokenizer.ggml.token_type).
enum class TokenType : int32_t {
  kUndefined = 0, kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6,
};

enum class TokenizerKind {
  kSentencePiece /* "llama" */, kByteLevelBpe /* "gpt2" */, kWordPiece /* "bert" */, kUnigram /* "t5" */
};
// "llama", "gpt2", "bert" or "t5": the tokenizer.ggml.model family (gemma4 files are
// "gpt2" with a raw-UTF-8 pre-tokenizer).
const char* tokenizer_kind_name(TokenizerKind k);

struct Vocab {
  TokenizerKind kind = TokenizerKind::kSentencePiece;
  std::string pre;  // tokenizer.ggml.pre: selects the pre-tokenizer regex for gpt2
  std::vector<std::string> pieces;
  std::vector<float> scores;      // may be empty for byte-level BPE
  std::vector<TokenType> types;   // may be empty: all normal
  std::vector<std::string> merges;  // "a b" pairs, rank = index (byte-level BPE)
  int32_t bos = -1, eos = -1, unk = -1, pad = -1, eot = -1;
  std::vector<int32_t> eog;  // end-of-generation ids (eos, eot, <end_of_turn>, ...)
  bool add_bos = false, add_eos = false;
  // The separator between a text pair's two texts (tokenizer/text_pair.h) and whether
  // one is added after the first text's EOS (RoBERTa's "</s></s>"), as llama.cpp reads them.
  int32_t sep = -1;
  bool add_sep = false;
  bool add_space_prefix = true;  // SentencePiece and Unigram
  bool lowercase = true, strip_accents = true;  // WordPiece: tokenizer.ggml.normalizer.*
  // Unigram's normalizer: SentencePiece's precompiled charsmap (raw bytes of
  // tokenizer.ggml.precompiled_charsmap; empty: no mapping) and its whitespace options.
  // GGUF has keys for remove_extra_whitespaces only; llama.cpp fixes the other two.
  std::string precompiled_charsmap;
  bool remove_extra_whitespaces = false;
  bool escape_whitespaces = true;           // spaces become "▁"
  bool treat_whitespace_as_suffix = false;  // the dummy space goes after the text instead

  static Result<Vocab> from_gguf(const GgufFile& file);

  TokenType type(int32_t id) const { return types.empty() ? TokenType::kNormal : types[id]; }

  // Sets eot (when unset) and eog from eos, eot and the control tokens named like
  // end-of-turn markers (<end_of_turn>, <|eot_id|>, <|im_end|>, <|endoftext|>, ...),
  // as llama.cpp does. from_gguf calls it; Tokenizer::create calls it when eog is empty.
  void fill_eog();
};

// The k tokens (all, when fewer) a text most likely holds, most frequent first, as the
// vocabulary ranks them: by SentencePiece score (higher first) where the file has scores,
// else by id (a byte-level BPE's ids follow its merge order, the most frequent pairs
// merged first). Control, unused and unknown tokens are left out, except the
// end-of-generation ones. O(n log n) in the vocabulary.
std::vector<int32_t> frequent_tokens(const Vocab& v, int32_t k);

}  // namespace pagoda

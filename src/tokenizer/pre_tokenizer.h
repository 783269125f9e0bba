// Splits text into the "words" a byte-level BPE tokenizer merges within, reproducing the
// pre-tokenizer regexes of GPT-2, Llama 3 and Qwen2 by hand, faster than the regex engine
// the other pre-tokenizers run on (regex_split.h; word_splitter.h picks). Each variant is the same alternation with small differences, so
// one hand-written matcher takes a spec instead of a pattern. Words are returned as
// byte ranges of the input; invalid UTF-8 bytes are treated as one-byte punctuation.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace pagoda {

enum class PreTokenizer {
  // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  kGpt2,
  // (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
  //   ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
  kLlama3,
  // As kLlama3 but \p{N} one digit at a time.
  kQwen2,
};

struct WordSpan {
  uint32_t begin, end;  // byte offsets into the text
};

// Appends the words of `text` to `out`; together they cover the text exactly.
void pre_tokenize(PreTokenizer kind, std::string_view text, std::vector<WordSpan>& out);

}  // namespace pagoda

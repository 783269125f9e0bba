// Splitting text into pre-tokenizer words with a list of regular expressions, as Hugging
// Face's Split pre-tokenizer (behaviour "isolated") and llama.cpp's unicode_regex_split
// do: each pattern in turn cuts every current piece into its matches and the gaps
// between them. Patterns are compiled once with PCRE2 in UTF mode with Unicode
// properties (\p{L}, \p{N}, \s over all of Unicode), with invalid UTF-8 allowed in the
// text (invalid bytes match no character class, so they stay in the gaps), and JIT-
// compiled where PCRE2 can. Immutable after compile(): split() may run on many threads.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "tokenizer/pre_tokenizer.h"

namespace pagoda {

class RegexSplitter {
 public:
  // Fails with PCRE2's message and offset for a pattern it cannot compile.
  static Result<RegexSplitter> compile(const std::vector<std::string_view>& patterns);
  // Appends the words of `text` to `out`; together they cover the text exactly, in order.
  void split(std::string_view text, std::vector<WordSpan>& out) const;

 private:
  struct Compiled;
  std::vector<std::shared_ptr<const Compiled>> patterns_;
};

}  // namespace pagoda

// The pre-tokenizer of a byte-level BPE vocabulary, chosen by its tokenizer.ggml.pre name
// (pre_tokenizer_table.cpp lists the names): either a hand-written matcher
// (pre_tokenizer.h) or a list of PCRE2 regexes (regex_split.h). Built once per tokenizer
// (compiling its regexes, about a millisecond); const and thread-safe afterwards.
#pragma once

#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/regex_split.h"

namespace pagoda {

class WordSplitter {
 public:
  // Fails, naming the pre-tokenizer, for a name the table does not have.
  static Result<WordSplitter> for_name(std::string_view pre);
  // Appends the words of `text` to `out`; together they cover the text exactly.
  void split(std::string_view text, std::vector<WordSpan>& out) const;
  // BPE takes a word that is itself a token whole, before any merge (llama.cpp's
  // ignore_merges, as Hugging Face's Llama 3 tokenizer does).
  bool ignore_merges() const { return ignore_merges_; }
  // BPE over raw UTF-8 with spaces escaped as "▁" (Gemma 4) instead of GPT-2's bytes.
  bool raw_utf8() const { return raw_utf8_; }
  // How many names are known (for messages and tests).
  static size_t known_names();

 private:
  std::optional<PreTokenizer> hand_;
  std::shared_ptr<const RegexSplitter> regex_;
  bool ignore_merges_ = false;
  bool raw_utf8_ = false;
};

}  // namespace pagoda

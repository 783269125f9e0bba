#include "tokenizer/word_splitter.h"
#include "base/printable.h"

#include "tokenizer/pre_tokenizer_table.h"

namespace pagoda {

Result<WordSplitter> WordSplitter::for_name(std::string_view pre) {
  for (const PreTokenizerSpec& spec : pre_tokenizer_specs()) {
    bool hit = false;
    for (std::string_view n : spec.names) hit = hit || n == pre;
    if (!hit) continue;
    WordSplitter w;
    w.ignore_merges_ = spec.ignore_merges;
    w.raw_utf8_ = spec.raw_utf8;
    w.hand_ = spec.hand;
    if (!w.hand_) {
      auto r = RegexSplitter::compile(spec.regexes);
      if (!r) return error("pre-tokenizer {}: {}", in_quotes(pre), r.status().message());
      w.regex_ = std::make_shared<const RegexSplitter>(std::move(r.value()));
    }
    return w;
  }
  return error("byte-level BPE pre-tokenizer {} is not supported (Pagoda knows {} tokenizer.ggml.pre names; "
               "see docs/models.md)",
               in_quotes(pre), known_names());
}

void WordSplitter::split(std::string_view text, std::vector<WordSpan>& out) const {
  if (hand_) pre_tokenize(*hand_, text, out);
  else regex_->split(text, out);
}

size_t WordSplitter::known_names() {
  size_t n = 0;
  for (const PreTokenizerSpec& spec : pre_tokenizer_specs()) n += spec.names.size();
  return n;
}

}  // namespace pagoda

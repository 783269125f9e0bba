// The structure prompt compression keeps: a prompt's parts (an instruction and a question
// kept whole, the context between them compressed) and the context's sentences (whose
// final punctuation stays and whose first word is not taken for a name). Pure text
// functions on bytes (UTF-8 passes through untouched), linear in the text; thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace pagoda {

struct PromptParts {
  std::string instruction;  // kept whole, before the context
  std::string context;      // what is compressed
  std::string question;     // kept whole, after the context
};

// A prompt given as one text: the question is its last paragraph (after the last blank
// line) when it has more than one, the context the rest; no instruction is guessed.
PromptParts split_prompt(std::string_view prompt);

// The parts that are not empty, joined by a blank line (as LLMLingua joins them).
std::string join_prompt(const PromptParts& parts);

struct ByteSpan {
  size_t begin = 0, end = 0;
};

// Sentences covering the text end to end, each from the whitespace before it to its last
// byte: one ends after '.', '!' or '?' (and any closing quotes or brackets) followed by
// whitespace or the end, or at a blank line. Common abbreviations (Mr., Dr., e.g.) do not
// end one.
std::vector<ByteSpan> split_sentences(std::string_view text);

}  // namespace pagoda

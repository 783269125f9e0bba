// Finds special-token text (control tokens like "<start_of_turn>", user-defined tokens
// like Gemma's runs of newlines) inside input text, so it becomes its token id instead
// of being tokenized as characters. User-defined tokens are always matched; control and
// unknown tokens only when the caller asks to parse special text.
//
// Matching is leftmost-longest, as the Hugging Face added-token splitter and
// SentencePiece's user-defined symbol matcher do. (llama.cpp instead splits on the
// longest token text first across the whole input; the two differ only when special
// texts overlap each other, e.g. "ab" and "bcd" in "abcd".)
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace pagoda {

// A piece of the input: either raw text [begin, end) still to tokenize, or a token.
struct Fragment {
  int32_t token = -1;  // -1: raw text
  uint32_t begin = 0, end = 0;
};

class SpecialTokenMatcher {
 public:
  explicit SpecialTokenMatcher(const Vocab& vocab);

  // Splits `text` into fragments; without parse_special only user-defined tokens split.
  // Cost: O(text length x longest special text), independent of how many there are.
  std::vector<Fragment> split(std::string_view text, bool parse_special) const;

 private:
  struct Node {
    // Children sorted by byte; a binary search keeps the trie compact for 6k+ tokens.
    std::vector<std::pair<uint8_t, uint32_t>> next;
    int32_t always = -1;   // user-defined token ending here
    int32_t special = -1;  // control/unknown token ending here (parse_special only)
  };
  uint32_t child(uint32_t node, uint8_t b) const;

  std::vector<Node> nodes_;
  bool any_always_ = false;
};

}  // namespace pagoda

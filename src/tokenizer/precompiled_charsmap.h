// SentencePiece's precompiled normalizer (NormalizerSpec.precompiled_charsmap, stored by
// GGUF converters as tokenizer.ggml.precompiled_charsmap): a little-endian uint32 byte
// count, that many bytes of a Darts-clone double-array trie (32-bit units: BASE in bits
// 10-30, shifted by 8 more when bit 9 is set; has-leaf in bit 8; label in bits 0-7, bit
// 31 marking value units), then NUL-terminated replacement strings the trie's values
// index. It maps the longest matching input prefix (e.g. NFKC's "ﬁ" -> "fi", full-width
// "Ａ" -> "A") to its replacement.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace pagoda {

class PrecompiledCharsmap {
 public:
  PrecompiledCharsmap() = default;  // maps nothing
  // Checks the header as llama.cpp does (the trie must leave room for replacements).
  // The view is copied: the result does not refer to `blob`.
  static Result<PrecompiledCharsmap> parse(std::string_view blob);

  struct Match {
    std::string_view replacement;  // points into this object
    size_t consumed = 0;           // input bytes replaced; 0: no match
  };
  // The longest prefix of `input` the trie maps. Matching stops at a NUL byte. In a
  // corrupt trie matching stops where a unit would lie outside it, and a match whose
  // replacement lies outside the strings or lacks its NUL counts as no match (llama.cpp
  // throws in both cases).
  Match longest_match(std::string_view input) const;
  bool empty() const { return units_.empty(); }

 private:
  std::vector<uint32_t> units_;
  std::string replacements_;
};

}  // namespace pagoda

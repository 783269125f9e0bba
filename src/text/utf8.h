// UTF-8 helpers for the tokenizers. Text reaching the tokenizer may be invalid UTF-8
// (user input, or a stream cut mid-character), so nothing here assumes validity:
// a byte that does not start a well-formed sequence is reported as a one-byte unit
// and the callers decide what it becomes (a byte token, a held-back tail, ...).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace pagoda::utf8 {

// Marks a byte that does not start a well-formed UTF-8 sequence.
inline constexpr uint32_t kInvalid = 0xFFFFFFFFu;

struct Char {
  uint32_t cp;   // code point, or kInvalid
  uint32_t len;  // bytes consumed: 1..4 (1 for an invalid byte)
};

// Decodes the character at s[i] (i < s.size()). Rejects overlong forms, surrogates,
// code points past U+10FFFF and truncated sequences, each as a single invalid byte.
Char decode(std::string_view s, size_t i);

void append(std::string& out, uint32_t cp);

// Length of the longest prefix of s that does not end inside an incomplete but still
// completable character: the bytes after it could become a character once more arrive.
// Invalid bytes count as complete (no later byte can fix them).
size_t complete_prefix(std::string_view s);

}  // namespace pagoda::utf8

// The three Unicode classes the byte-level BPE pre-tokenizer regexes use: \p{L}, \p{N}
// and \s. Backed by a generated range table (tools/gen_unicode_table.py), ASCII by a
// direct lookup. Everything else (punctuation, symbols, marks, unassigned, invalid
// bytes) is kOther, which is what [^\s\p{L}\p{N}] matches.
#pragma once

#include <cstdint>

namespace pagoda {

enum class UnicodeClass : uint8_t { kOther = 0, kLetter = 1, kNumber = 2, kSpace = 3 };

UnicodeClass unicode_class(uint32_t cp);

}  // namespace pagoda

// Unicode character properties the WordPiece (BERT) normalizer and pre-tokenizer use,
// as Hugging Face's BertNormalizer / BertPreTokenizer define them: whitespace,
// control, punctuation (with ASCII symbols), non-spacing marks (the accents stripped
// after canonical decomposition), CJK ideographs, and the decomposition itself. Backed by
// utf8proc's tables; pure functions, thread-safe.
#pragma once

#include <cstdint>
#include <vector>

namespace pagoda::text {

// Unicode's White_Space property: \t..\r, U+0085, the space separators (Zs), U+2028/9.
bool is_whitespace(uint32_t cp);
// Control, format, private-use and unassigned characters, except \t \n \r.
bool is_control(uint32_t cp);
// Punctuation (P*), and the ASCII symbols BERT splits on as punctuation ($ + < = > ^ ` | ~).
bool is_punctuation(uint32_t cp);
// Non-spacing combining marks (Mn): what strip_accents removes after decomposition.
bool is_nonspacing_mark(uint32_t cp);
// The CJK ideograph blocks BERT puts spaces around.
bool is_cjk_ideograph(uint32_t cp);
// Appends the canonical decomposition of cp (itself when it has none).
void append_nfd(std::vector<uint32_t>& out, uint32_t cp);

}  // namespace pagoda::text

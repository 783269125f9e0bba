// GPT-2's reversible mapping between bytes and printable characters. Byte-level BPE
// vocabularies store pieces in this alphabet (a space is "Ġ", a newline "Ċ"), so text
// bytes are mapped before lookup and pieces are mapped back when decoding.
#pragma once

#include <cstdint>

namespace pagoda {

// The code point byte b is written as in byte-level BPE pieces.
uint32_t byte_to_codepoint(uint8_t b);

// The byte a piece character stands for, or -1 if cp is not in the mapped alphabet.
int codepoint_to_byte(uint32_t cp);

}  // namespace pagoda

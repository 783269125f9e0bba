// Unicode case mapping and case properties of single code points, as Python's str
// methods use them (upper, lower, title, capitalize, swapcase, isupper, islower), backed
// by utf8proc's tables (Unicode's simple case mappings and general categories). Python
// also applies the unconditional multi-character mappings of SpecialCasing.txt; the two
// that occur in chat text ('ß'.upper() == 'SS', 'İ'.lower() == 'i̇') are applied by the
// append_* helpers, the rest (ligatures, a few Greek and Armenian forms) map singly.
// Pure functions over immutable tables: thread-safe, O(1) per code point.
#pragma once

#include <cstdint>
#include <string>

namespace pagoda::text {

uint32_t to_upper(uint32_t cp);
uint32_t to_lower(uint32_t cp);
uint32_t to_title(uint32_t cp);

// Python's notion of a cased character: an uppercase, lowercase or titlecase letter, or
// any character with a case mapping.
bool is_cased(uint32_t cp);
// The character has a lowercase form other than itself (it is upper or title case).
bool has_lower_form(uint32_t cp);
// The character has an uppercase form other than itself, or expands when uppercased.
bool has_upper_form(uint32_t cp);

// Appends the full uppercase / lowercase / titlecase form of cp as UTF-8.
void append_upper(std::string& out, uint32_t cp);
void append_lower(std::string& out, uint32_t cp);
void append_title(std::string& out, uint32_t cp);

}  // namespace pagoda::text

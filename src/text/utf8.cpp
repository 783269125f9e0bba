#include "text/utf8.h"

namespace pagoda::utf8 {
namespace {

// Expected length from the lead byte, 0 for a byte that cannot start a character
// (continuation bytes, C0/C1 overlong leads, F5..FF).
uint32_t lead_length(uint8_t b) {
  if (b < 0x80) return 1;
  if (b < 0xC2) return 0;
  if (b < 0xE0) return 2;
  if (b < 0xF0) return 3;
  if (b < 0xF5) return 4;
  return 0;
}

// The second byte's allowed range depends on the lead: this is what excludes overlong
// three/four-byte forms, UTF-16 surrogates and code points past U+10FFFF.
bool second_ok(uint8_t lead, uint8_t b) {
  switch (lead) {
    case 0xE0: return b >= 0xA0 && b <= 0xBF;
    case 0xED: return b >= 0x80 && b <= 0x9F;
    case 0xF0: return b >= 0x90 && b <= 0xBF;
    case 0xF4: return b >= 0x80 && b <= 0x8F;
    default: return b >= 0x80 && b <= 0xBF;
  }
}

bool is_cont(uint8_t b) { return (b & 0xC0) == 0x80; }

}  // namespace

Char decode(std::string_view s, size_t i) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data()) + i;
  const size_t avail = s.size() - i;
  const uint8_t b0 = p[0];
  const uint32_t n = lead_length(b0);
  if (n == 1) return {b0, 1};
  if (n == 0 || avail < n || !second_ok(b0, p[1])) return {kInvalid, 1};
  for (uint32_t k = 2; k < n; ++k) {
    if (!is_cont(p[k])) return {kInvalid, 1};
  }
  uint32_t cp = b0 & (0x7F >> n);
  for (uint32_t k = 1; k < n; ++k) cp = (cp << 6) | (p[k] & 0x3F);
  return {cp, n};
}

void append(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

size_t complete_prefix(std::string_view s) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  const size_t n = s.size();
  // Only the last three bytes can belong to an unfinished character; find its lead.
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const size_t start = n - back;
    const uint8_t b = p[start];
    if (is_cont(b)) continue;
    const uint32_t need = lead_length(b);
    if (need <= back) return n;  // ASCII, invalid lead, or a character that is complete
    // Hold the tail only if what we have so far can still become a valid character.
    if (back >= 2 && !second_ok(b, p[start + 1])) return n;
    for (size_t k = start + 2; k < n; ++k) {
      if (!is_cont(p[k])) return n;
    }
    return start;
  }
  return n;
}

}  // namespace pagoda::utf8

#include "base/printable.h"

#include <fmt/format.h>

#include <cstdint>

namespace pagoda {
namespace {

// Length of the valid UTF-8 sequence at s[i] and its code point, or 0 when invalid
// (overlong forms, surrogates and values past U+10FFFF count as invalid).
size_t utf8_sequence(std::string_view s, size_t i, uint32_t& cp) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  size_t len = 0;
  uint32_t min = 0;
  if (b0 < 0x80) {
    cp = b0;
    return 1;
  }
  if ((b0 & 0xe0) == 0xc0) len = 2, cp = b0 & 0x1f, min = 0x80;
  else if ((b0 & 0xf0) == 0xe0) len = 3, cp = b0 & 0x0f, min = 0x800;
  else if ((b0 & 0xf8) == 0xf0) len = 4, cp = b0 & 0x07, min = 0x10000;
  else return 0;
  if (i + len > s.size()) return 0;
  for (size_t k = 1; k < len; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (b & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return len;
}

bool hides_or_reorders(uint32_t cp) {
  return (cp >= 0x200b && cp <= 0x200f) || (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069) ||
         (cp >= 0x80 && cp < 0xa0);  // C1 controls (CSI, OSC, ... on some terminals)
}

}  // namespace

std::string printable(std::string_view s, size_t max_bytes) {
  std::string out;
  const size_t shown = s.size() < max_bytes ? s.size() : max_bytes;
  out.reserve(shown + 16);
  for (size_t i = 0; i < shown;) {
    uint32_t cp = 0;
    const size_t len = utf8_sequence(s, i, cp);
    if (len == 0) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(s[i]));
      ++i;
      continue;
    }
    if (len > 1 && i + len > shown) {  // a sequence cut by the limit: show its bytes
      for (; i < shown; ++i) out += fmt::format("\\x{:02x}", static_cast<unsigned char>(s[i]));
      break;
    }
    if (cp == '\n') out += "\\n";
    else if (cp == '\t') out += "\\t";
    else if (cp == '\r') out += "\\r";
    else if (cp == '\\') out += "\\\\";
    else if (cp < 0x20 || cp == 0x7f) out += fmt::format("\\x{:02x}", cp);
    else if (hides_or_reorders(cp)) out += fmt::format("\\u{{{:04x}}}", cp);
    else out.append(s.substr(i, len));
    i += len;
  }
  if (s.size() > shown) out += fmt::format("... ({} bytes)", s.size());
  return out;
}

std::string in_quotes(std::string_view s, size_t max_bytes) {
  const std::string p = printable(s, max_bytes);
  std::string out;
  out.reserve(p.size() + 4);
  out.push_back('\'');
  // The length note goes after the closing quote: 'abc...' (5000 bytes).
  const size_t note = s.size() > max_bytes ? p.rfind("... (") : std::string::npos;
  if (note == std::string::npos) {
    out.append(p);
    out.push_back('\'');
    return out;
  }
  out.append(p, 0, note);
  out.append("...'");
  out.append(p, note + 3, std::string::npos);
  return out;
}

}  // namespace pagoda

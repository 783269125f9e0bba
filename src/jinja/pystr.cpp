#include "jinja/pystr.h"

#include <algorithm>
#include <cstdio>

#include "text/case_map.h"
#include "text/utf8.h"

namespace pagoda::jinja {

bool is_py_space(uint32_t cp) {
  if (cp < 0x80) return (cp >= 0x09 && cp <= 0x0d) || (cp >= 0x1c && cp <= 0x20);
  return cp == 0x85 || cp == 0xa0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) ||
         cp == 0x2028 || cp == 0x2029 || cp == 0x202f || cp == 0x205f || cp == 0x3000;
}

std::vector<std::string_view> split_chars(std::string_view s) {
  std::vector<std::string_view> out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    size_t len = utf8::decode(s, i).len;
    out.push_back(s.substr(i, len));
    i += len;
  }
  return out;
}

size_t char_count(std::string_view s) {
  size_t n = 0;
  for (size_t i = 0; i < s.size(); i += utf8::decode(s, i).len) ++n;
  return n;
}

namespace {

// One decoded character: its code point (kInvalid for a stray byte) and byte span.
struct CharSpan {
  uint32_t cp;
  size_t pos, len;
};

std::vector<CharSpan> decode_all(std::string_view s) {
  std::vector<CharSpan> out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    utf8::Char c = utf8::decode(s, i);
    out.push_back({c.cp, i, c.len});
    i += c.len;
  }
  return out;
}

bool is_space_char(const CharSpan& c) { return c.cp != utf8::kInvalid && is_py_space(c.cp); }

}  // namespace

std::string_view py_strip(std::string_view s, const std::optional<std::string>& chars, bool left,
                          bool right) {
  std::vector<CharSpan> cs = decode_all(s);
  std::vector<std::string_view> strip_set;
  if (chars) strip_set = split_chars(*chars);
  auto strippable = [&](const CharSpan& c) {
    if (!chars) return is_space_char(c);
    std::string_view bytes = s.substr(c.pos, c.len);
    return std::find(strip_set.begin(), strip_set.end(), bytes) != strip_set.end();
  };
  size_t b = 0, e = cs.size();
  if (left)
    while (b < e && strippable(cs[b])) ++b;
  if (right)
    while (e > b && strippable(cs[e - 1])) --e;
  if (b == e) return s.substr(0, 0);
  return s.substr(cs[b].pos, cs[e - 1].pos + cs[e - 1].len - cs[b].pos);
}

std::vector<std::string> py_split(std::string_view s, const std::optional<std::string>& sep,
                                  int64_t maxsplit) {
  std::vector<std::string> out;
  if (maxsplit < 0) maxsplit = INT64_MAX;
  if (sep) {
    size_t start = 0;
    while (maxsplit-- > 0) {
      size_t at = s.find(*sep, start);
      if (at == std::string_view::npos) break;
      out.emplace_back(s.substr(start, at - start));
      start = at + sep->size();
    }
    out.emplace_back(s.substr(start));
    return out;
  }
  // Runs of whitespace separate; leading and trailing whitespace yield nothing.
  std::vector<CharSpan> cs = decode_all(s);
  size_t i = 0, n = cs.size();
  while (maxsplit-- > 0) {
    while (i < n && is_space_char(cs[i])) ++i;
    if (i == n) break;
    size_t j = i;
    while (i < n && !is_space_char(cs[i])) ++i;
    out.emplace_back(s.substr(cs[j].pos, cs[i - 1].pos + cs[i - 1].len - cs[j].pos));
  }
  if (i < n) {
    while (i < n && is_space_char(cs[i])) ++i;
    if (i < n) out.emplace_back(s.substr(cs[i].pos));
  }
  return out;
}

std::vector<std::string> py_rsplit(std::string_view s, const std::optional<std::string>& sep,
                                   int64_t maxsplit) {
  std::vector<std::string> out;
  if (maxsplit < 0) maxsplit = INT64_MAX;
  if (sep) {
    size_t end = s.size();
    while (maxsplit-- > 0) {
      if (end < sep->size()) break;
      size_t at = s.rfind(*sep, end - sep->size());
      if (at == std::string_view::npos) break;
      out.emplace_back(s.substr(at + sep->size(), end - at - sep->size()));
      end = at;
    }
    out.emplace_back(s.substr(0, end));
    std::reverse(out.begin(), out.end());
    return out;
  }
  std::vector<CharSpan> cs = decode_all(s);
  size_t i = cs.size();
  while (maxsplit-- > 0) {
    while (i > 0 && is_space_char(cs[i - 1])) --i;
    if (i == 0) break;
    size_t j = i;
    while (i > 0 && !is_space_char(cs[i - 1])) --i;
    out.emplace_back(s.substr(cs[i].pos, cs[j - 1].pos + cs[j - 1].len - cs[i].pos));
  }
  if (i > 0) {
    while (i > 0 && is_space_char(cs[i - 1])) --i;
    if (i > 0) out.emplace_back(s.substr(0, cs[i - 1].pos + cs[i - 1].len));
  }
  std::reverse(out.begin(), out.end());
  return out;
}

static bool is_line_break(uint32_t cp) {
  return cp == '\n' || cp == '\r' || cp == 0x0b || cp == 0x0c || cp == 0x1c || cp == 0x1d ||
         cp == 0x1e || cp == 0x85 || cp == 0x2028 || cp == 0x2029;
}

std::vector<std::string> py_splitlines(std::string_view s, bool keepends) {
  std::vector<std::string> out;
  std::vector<CharSpan> cs = decode_all(s);
  size_t line_start = 0;  // byte offset
  for (size_t i = 0; i < cs.size(); ++i) {
    if (cs[i].cp == utf8::kInvalid || !is_line_break(cs[i].cp)) continue;
    size_t end = cs[i].pos;
    size_t next = cs[i].pos + cs[i].len;
    if (cs[i].cp == '\r' && i + 1 < cs.size() && cs[i + 1].cp == '\n') {
      ++i;
      next += 1;
    }
    out.emplace_back(s.substr(line_start, (keepends ? next : end) - line_start));
    line_start = next;
  }
  if (line_start < s.size()) out.emplace_back(s.substr(line_start));
  return out;
}

// ---------------------------------------------------------------------------------
// Case mapping

namespace {

// Applies `map` to each valid character; invalid bytes are copied as they are.
template <typename F>
std::string map_chars(std::string_view s, F map) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    utf8::Char c = utf8::decode(s, i);
    if (c.cp == utf8::kInvalid) {
      out.append(s.substr(i, c.len));
    } else {
      map(out, c.cp);
    }
    i += c.len;
  }
  return out;
}

}  // namespace

std::string py_upper(std::string_view s) {
  return map_chars(s, [](std::string& out, uint32_t c) { text::append_upper(out, c); });
}

std::string py_lower(std::string_view s) {
  return map_chars(s, [](std::string& out, uint32_t c) { text::append_lower(out, c); });
}

std::string py_swapcase(std::string_view s) {
  return map_chars(s, [](std::string& out, uint32_t c) {
    if (text::has_lower_form(c)) {
      text::append_lower(out, c);
    } else {
      text::append_upper(out, c);
    }
  });
}

std::string py_title(std::string_view s) {
  bool previous_cased = false;
  return map_chars(s, [&](std::string& out, uint32_t c) {
    if (text::is_cased(c)) {
      if (previous_cased) {
        text::append_lower(out, c);
      } else {
        text::append_title(out, c);
      }
      previous_cased = true;
    } else {
      utf8::append(out, c);
      previous_cased = false;
    }
  });
}

std::string py_capitalize(std::string_view s) {
  bool first = true;
  return map_chars(s, [&](std::string& out, uint32_t c) {
    if (first) {
      text::append_title(out, c);
      first = false;
    } else {
      text::append_lower(out, c);
    }
  });
}

// Python: islower() is true when there is a cased character and none is uppercase.
bool py_islower(std::string_view s) {
  bool any_cased = false;
  for (size_t i = 0; i < s.size();) {
    utf8::Char c = utf8::decode(s, i);
    i += c.len;
    if (c.cp == utf8::kInvalid || !text::is_cased(c.cp)) continue;
    if (text::has_lower_form(c.cp)) return false;
    any_cased = true;
  }
  return any_cased;
}

bool py_isupper(std::string_view s) {
  bool any_cased = false;
  for (size_t i = 0; i < s.size();) {
    utf8::Char c = utf8::decode(s, i);
    i += c.len;
    if (c.cp == utf8::kInvalid || !text::is_cased(c.cp)) continue;
    if (text::has_upper_form(c.cp)) return false;
    any_cased = true;
  }
  return any_cased;
}

// ---------------------------------------------------------------------------------
// Searching and replacing

std::string py_replace(std::string_view s, std::string_view old, std::string_view repl,
                       int64_t count) {
  if (count < 0) count = INT64_MAX;
  std::string out;
  if (old.empty()) {
    // Python inserts the replacement before every character and at the end.
    std::vector<std::string_view> cs = split_chars(s);
    for (size_t i = 0; i <= cs.size(); ++i) {
      if (count > 0) {
        out += repl;
        --count;
      }
      if (i < cs.size()) out += cs[i];
    }
    return out;
  }
  size_t start = 0;
  while (count > 0) {
    size_t at = s.find(old, start);
    if (at == std::string_view::npos) break;
    out.append(s.substr(start, at - start));
    out += repl;
    start = at + old.size();
    --count;
  }
  out.append(s.substr(start));
  return out;
}

int64_t py_find(std::string_view s, std::string_view sub, bool reverse) {
  size_t at = reverse ? s.rfind(sub) : s.find(sub);
  if (at == std::string_view::npos) return -1;
  return static_cast<int64_t>(char_count(s.substr(0, at)));
}

int64_t py_count(std::string_view s, std::string_view sub) {
  if (sub.empty()) return static_cast<int64_t>(char_count(s)) + 1;
  int64_t n = 0;
  for (size_t at = s.find(sub); at != std::string_view::npos; at = s.find(sub, at + sub.size()))
    ++n;
  return n;
}

// ---------------------------------------------------------------------------------
// repr()

// Python's str.isprintable() for one code point, approximately: control, format,
// separator (other than ' '), surrogate and private-use characters are not printable.
// Unassigned code points are treated as printable (no table of them here).
static bool is_printable(uint32_t c) {
  if (c < 0x20 || c == 0x7f) return false;
  if (c < 0x7f) return true;
  if (c <= 0xa0 || c == 0xad) return false;
  if (c == 0x1680 || (c >= 0x2000 && c <= 0x200f) || (c >= 0x2028 && c <= 0x202f) ||
      (c >= 0x205f && c <= 0x2064) || (c >= 0x2066 && c <= 0x206f) || c == 0x3000)
    return false;
  if ((c >= 0x600 && c <= 0x605) || c == 0x61c || c == 0x6dd || c == 0x70f || c == 0x180e)
    return false;
  if (c == 0xfeff || (c >= 0xfff9 && c <= 0xfffb)) return false;
  if ((c >= 0xd800 && c <= 0xf8ff) || c >= 0xf0000) return false;  // surrogates, private use
  if (c == 0x110bd || c == 0xe0001 || (c >= 0xe0020 && c <= 0xe007f)) return false;
  return true;
}

std::string repr_string(std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out;
  out.reserve(s.size() + 2);
  out += quote;
  char buf[16];
  for (size_t i = 0; i < s.size();) {
    utf8::Char c = utf8::decode(s, i);
    if (c.cp == utf8::kInvalid) {
      out.append(s.substr(i, c.len));
    } else if (c.cp == static_cast<uint32_t>(quote) || c.cp == '\\') {
      out += '\\';
      out += static_cast<char>(c.cp);
    } else if (c.cp == '\n') {
      out += "\\n";
    } else if (c.cp == '\r') {
      out += "\\r";
    } else if (c.cp == '\t') {
      out += "\\t";
    } else if (!is_printable(c.cp)) {
      if (c.cp < 0x100) {
        snprintf(buf, sizeof(buf), "\\x%02x", c.cp);
      } else if (c.cp < 0x10000) {
        snprintf(buf, sizeof(buf), "\\u%04x", c.cp);
      } else {
        snprintf(buf, sizeof(buf), "\\U%08x", c.cp);
      }
      out += buf;
    } else {
      out.append(s.substr(i, c.len));
    }
    i += c.len;
  }
  out += quote;
  return out;
}

}  // namespace pagoda::jinja

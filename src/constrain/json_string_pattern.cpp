#include "constrain/json_string_pattern.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

namespace pagoda {

namespace {

// Characters a JSON string cannot hold raw.
bool special(uint32_t c) { return c < 0x20 || c == '"' || c == '\\'; }

// A regex matching the JSON escape of special character c.
std::string escaped(uint32_t c) {
  switch (c) {
    case '"': return R"(\\")";
    case '\\': return R"(\\\\)";
    case '\b': return R"(\\b)";
    case '\f': return R"(\\f)";
    case '\n': return R"(\\n)";
    case '\r': return R"(\\r)";
    case '\t': return R"(\\t)";
    default: {
      const char* hex = "0123456789abcdef";
      const char lo = hex[c & 15];
      const char up = static_cast<char>(lo >= 'a' ? lo - 32 : lo);
      return fmt::format(R"(\\u00{}{})", static_cast<char>('0' + (c >> 4)),
                         lo == up ? std::string(1, lo) : fmt::format("[{}{}]", lo, up));
    }
  }
}

// A code point written inside a character class.
std::string class_char(uint32_t c) {
  if (c < 0x80) {
    const char ch = static_cast<char>(c);
    if ((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z')) return std::string(1, ch);
    if (c < 0x20 || c == 0x7f) return fmt::format("\\x{:02x}", c);
    return std::string("\\") + ch;
  }
  std::string s;  // UTF-8
  if (c < 0x800) {
    s += static_cast<char>(0xC0 | (c >> 6));
  } else if (c < 0x10000) {
    s += static_cast<char>(0xE0 | (c >> 12));
    s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
  } else {
    s += static_cast<char>(0xF0 | (c >> 18));
    s += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
  }
  s += static_cast<char>(0x80 | (c & 0x3F));
  return s;
}

class Rewriter {
 public:
  explicit Rewriter(std::string_view p) : p_(p) {}

  Result<std::string> run() {
    std::string out;
    while (i_ < p_.size()) {
      const char c = p_[i_];
      if (c == '\\' || c == '[') {
        auto atom = c == '\\' ? escape_atom() : char_class();
        if (!atom) return atom.status();
        out += *atom;
      } else if (c == '.') {
        ++i_;
        // Any character but a newline: the raw ones JSON allows, or an escape (not \n's).
        out += R"((?:[^"\\\x00-\x1f]|\\["\\/bfrt]|\\u000[0-9b-fB-F]|\\u001[0-9a-fA-F]))";
      } else if (c == '"') {
        ++i_;
        out += escaped('"');
      } else if (static_cast<unsigned char>(c) < 0x20) {
        ++i_;
        out += "(?:" + escaped(static_cast<unsigned char>(c)) + ")";
      } else {
        out += c;
        ++i_;
      }
    }
    return out;
  }

 private:
  // One code point of the pattern (UTF-8), advancing.
  uint32_t next_code_point() {
    const unsigned char b = static_cast<unsigned char>(p_[i_]);
    int n = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
    uint32_t c = n == 1 ? b : n == 2 ? (b & 0x1F) : n == 3 ? (b & 0x0F) : (b & 0x07);
    ++i_;
    for (int k = 1; k < n && i_ < p_.size(); ++k, ++i_) c = (c << 6) | (static_cast<unsigned char>(p_[i_]) & 0x3F);
    return c;
  }

  // \xHH or \uHHHH after the backslash and the letter; false when malformed.
  bool hex_escape(int digits, uint32_t& c) {
    if (i_ + static_cast<size_t>(digits) > p_.size()) return false;
    c = 0;
    for (int k = 0; k < digits; ++k) {
      const char h = p_[i_ + static_cast<size_t>(k)];
      const int v = (h >= '0' && h <= '9') ? h - '0' : (h >= 'a' && h <= 'f') ? h - 'a' + 10 : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
      if (v < 0) return false;
      c = c * 16 + static_cast<uint32_t>(v);
    }
    i_ += static_cast<size_t>(digits);
    return true;
  }

  // The character a single-character escape stands for (after the backslash), or
  // nullopt-like -1 for a class escape or something else.
  int64_t escape_char(char e) {
    switch (e) {
      case 'n': return '\n';
      case 't': return '\t';
      case 'r': return '\r';
      case 'f': return '\f';
      case 'v': return '\v';
      case '0': return 0;
      default: break;
    }
    if (e == 'x' || e == 'u') {
      uint32_t c = 0;
      if (hex_escape(e == 'x' ? 2 : 4, c)) return c;
      return -2;  // malformed: kept as written
    }
    if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '0' && e <= '9')) return -1;
    return static_cast<unsigned char>(e);  // \. \\ \" \/ \[ ...: the character itself
  }

  Result<std::string> escape_atom() {
    const size_t start = i_;
    ++i_;  // the backslash
    if (i_ >= p_.size()) return std::string("\\\\");
    const char e = p_[i_++];
    switch (e) {
      case 'd': case 'w': case 'b': case 'B': return std::string(p_.substr(start, i_ - start));
      case 's': return std::string(R"((?: |\\[tnrf]|\\u000[bB]))");
      case 'D': return "(?:[^0-9\"\\\\\\x00-\\x1f]|" + all_escapes() + ")";
      case 'W': return "(?:[^A-Za-z0-9_\"\\\\\\x00-\\x1f]|" + all_escapes() + ")";
      case 'S': return std::string("(?:[^ \"\\\\\\x00-\\x1f]|\\\\\"|\\\\\\\\|\\\\b|\\\\u000[0-8]|\\\\u000[eE]|\\\\u000[fF]|\\\\u001[0-9a-fA-F])");
      default: break;
    }
    const int64_t c = escape_char(e);
    if (c < 0) return std::string(p_.substr(start, i_ - start));
    if (special(static_cast<uint32_t>(c))) return "(?:" + escaped(static_cast<uint32_t>(c)) + ")";
    return std::string(p_.substr(start, i_ - start));
  }

  static std::string all_escapes() {
    return R"(\\"|\\\\|\\[bfnrt]|\\u00[01][0-9a-fA-F])";
  }

  Result<std::string> char_class() {
    const size_t start = i_;
    ++i_;  // [
    bool negated = false;
    if (i_ < p_.size() && p_[i_] == '^') {
      negated = true;
      ++i_;
    }
    std::vector<std::pair<uint32_t, uint32_t>> ranges;
    std::string escapes;  // \d \w kept as written
    bool space = false;
    while (i_ < p_.size() && p_[i_] != ']') {
      uint32_t lo = 0;
      if (p_[i_] == '\\') {
        ++i_;
        if (i_ >= p_.size()) break;
        const char e = p_[i_++];
        if (e == 'd' || e == 'w') {
          escapes += std::string("\\") + e;
          continue;
        }
        if (e == 's') {
          space = true;
          continue;
        }
        if (e == 'D' || e == 'W' || e == 'S')
          return error("'pattern' {}: \\{} inside a character class is not supported in structured output",
                       std::string(p_), e);
        if (e == 'b') {
          lo = '\b';
        } else {
          const int64_t c = escape_char(e);
          if (c < 0) return error("'pattern' {}: the escape \\{} inside a character class is not supported", std::string(p_), e);
          lo = static_cast<uint32_t>(c);
        }
      } else {
        lo = next_code_point();
      }
      uint32_t hi = lo;
      if (i_ + 1 < p_.size() && p_[i_] == '-' && p_[i_ + 1] != ']') {
        ++i_;
        if (p_[i_] == '\\') {
          ++i_;
          if (i_ >= p_.size()) break;
          const int64_t c = escape_char(p_[i_++]);
          if (c < 0) return error("'pattern' {}: a class escape cannot end a range", std::string(p_));
          hi = static_cast<uint32_t>(c);
        } else {
          hi = next_code_point();
        }
        if (hi < lo) return error("'pattern' {}: a range out of order in a character class", std::string(p_));
      }
      ranges.emplace_back(lo, hi);
    }
    if (i_ >= p_.size()) return error("'pattern' {}: a character class is not closed", std::string(p_));
    ++i_;  // ]
    if (space) {
      ranges.emplace_back(' ', ' ');
      ranges.emplace_back('\t', '\r');
    }
    // The specials the class lists.
    std::vector<uint32_t> listed;
    for (uint32_t c = 0; c < 0x20; ++c)
      if (std::any_of(ranges.begin(), ranges.end(), [&](auto r) { return r.first <= c && c <= r.second; })) listed.push_back(c);
    for (uint32_t c : {uint32_t{'"'}, uint32_t{'\\'}})
      if (std::any_of(ranges.begin(), ranges.end(), [&](auto r) { return r.first <= c && c <= r.second; })) listed.push_back(c);
    const bool listed_any = !listed.empty();
    // The class without the specials, as written for the regex engine.
    std::string body = escapes;
    for (auto [lo, hi] : ranges) {
      // Cut the specials out of [lo, hi]: what is left lies in these three spans.
      static constexpr std::pair<uint32_t, uint32_t> kSafe[] = {{0x20, 0x21}, {0x23, 0x5B}, {0x5D, 0x10FFFF}};
      for (auto [slo, shi] : kSafe) {
        const uint32_t a = std::max(lo, slo), b = std::min(hi, shi);
        if (a <= b) body += a == b ? class_char(a) : class_char(a) + "-" + class_char(b);
      }
    }
    std::vector<std::string> alts;
    if (negated) {
      // The complement holds every special the class does not list: their escapes.
      for (uint32_t c = 0; c < 0x20; ++c)
        if (std::find(listed.begin(), listed.end(), c) == listed.end()) alts.push_back(escaped(c));
      for (uint32_t c : {uint32_t{'"'}, uint32_t{'\\'}})
        if (std::find(listed.begin(), listed.end(), c) == listed.end()) alts.push_back(escaped(c));
      std::string out = "(?:[^" + body + R"("\\\x00-\x1f])";
      for (const std::string& a : alts) out += "|" + a;
      return out + ")";
    }
    if (!listed_any) return std::string(p_.substr(start, i_ - start));
    for (uint32_t c : listed) alts.push_back(escaped(c));
    std::string out = "(?:";
    bool sep = false;
    if (!body.empty()) {
      out += "[" + body + "]";
      sep = true;
    }
    for (const std::string& a : alts) {
      if (sep) out += "|";
      out += a;
      sep = true;
    }
    return out + ")";
  }

  std::string_view p_;
  size_t i_ = 0;
};

}  // namespace

Result<std::string> pattern_over_json_text(std::string_view pattern) { return Rewriter(pattern).run(); }

}  // namespace pagoda

#include "compress/segments.h"

#include <algorithm>
#include <array>
#include <cctype>

namespace pagoda {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

// Where the blank line that ends the text's last paragraph starts, or npos.
size_t last_blank_line(std::string_view s) {
  for (size_t i = s.size(); i-- > 0;) {
    if (s[i] != '\n') continue;
    size_t j = i;
    while (j > 0 && (s[j - 1] == ' ' || s[j - 1] == '\t' || s[j - 1] == '\r')) --j;
    if (j > 0 && s[j - 1] == '\n') return j - 1;
  }
  return std::string_view::npos;
}

// A period after one of these is part of the word, not a sentence's end.
bool is_abbreviation(std::string_view text, size_t dot) {
  static constexpr std::array<std::string_view, 12> kAbbrev = {"Mr", "Mrs", "Ms", "Dr", "St", "Jr",
                                                               "Sr", "vs", "etc", "e.g", "i.e", "No"};
  size_t b = dot;
  while (b > 0 && !is_space(text[b - 1]) && text[b - 1] != '"' && text[b - 1] != '(') --b;
  const std::string_view word = text.substr(b, dot - b);
  return std::find(kAbbrev.begin(), kAbbrev.end(), word) != kAbbrev.end();
}

bool is_closer(char c) { return c == '"' || c == '\'' || c == ')' || c == ']'; }

}  // namespace

PromptParts split_prompt(std::string_view prompt) {
  PromptParts p;
  const std::string_view t = trim(prompt);
  const size_t cut = last_blank_line(t);
  if (cut == std::string_view::npos || trim(t.substr(0, cut)).empty()) {
    p.context = std::string(t);
    return p;
  }
  p.context = std::string(trim(t.substr(0, cut)));
  p.question = std::string(trim(t.substr(cut)));
  return p;
}

std::string join_prompt(const PromptParts& parts) {
  std::string out;
  for (const std::string* s : {&parts.instruction, &parts.context, &parts.question}) {
    if (s->empty()) continue;
    if (!out.empty()) out += "\n\n";
    out += *s;
  }
  return out;
}

std::vector<ByteSpan> split_sentences(std::string_view text) {
  std::vector<ByteSpan> out;
  size_t start = 0;
  const size_t n = text.size();
  auto close_at = [&](size_t end) {
    if (end > start) out.push_back({start, end});
    start = end;
  };
  for (size_t i = 0; i < n; ++i) {
    const char c = text[i];
    if (c == '.' || c == '!' || c == '?') {
      size_t e = i + 1;
      while (e < n && (text[e] == '.' || text[e] == '!' || text[e] == '?')) ++e;
      while (e < n && is_closer(text[e])) ++e;
      // UTF-8 closing quotes ’ and ” (E2 80 99 / E2 80 9D).
      while (e + 2 < n && static_cast<unsigned char>(text[e]) == 0xE2 &&
             static_cast<unsigned char>(text[e + 1]) == 0x80 &&
             (static_cast<unsigned char>(text[e + 2]) == 0x99 || static_cast<unsigned char>(text[e + 2]) == 0x9D))
        e += 3;
      if ((e == n || is_space(text[e])) && !(c == '.' && is_abbreviation(text, i))) close_at(e);
      i = e - 1;
    } else if (c == '\n' && i + 1 < n) {
      // A blank line ends a sentence that has no final punctuation (a heading, a list item).
      size_t j = i + 1;
      while (j < n && (text[j] == ' ' || text[j] == '\t' || text[j] == '\r')) ++j;
      if (j < n && text[j] == '\n' && !trim(text.substr(start, i - start)).empty()) close_at(i);
    }
  }
  close_at(n);
  return out;
}

}  // namespace pagoda

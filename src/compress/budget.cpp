#include "compress/budget.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <numeric>

namespace pagoda {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

// Letters and digits of any script make a word; ASCII punctuation and the General
// Punctuation block (U+2000..U+206F: curly quotes, dashes, ellipsis; E2 80/81 xx) do not.
bool is_word(const std::string& p) {
  for (size_t i = 0; i < p.size(); ++i) {
    const auto c = static_cast<unsigned char>(p[i]);
    if (c < 0x80) {
      if (std::isalnum(c)) return true;
      continue;
    }
    if (c == 0xE2 && i + 1 < p.size() && (static_cast<unsigned char>(p[i + 1]) & 0xFE) == 0x80) {
      i += 2;
      continue;
    }
    if (c >= 0xC0) return true;  // the lead byte of another character
  }
  return false;
}

// A piece that continues a UTF-8 character begun by the token before (byte fallback).
bool continues_char(const std::string& p) {
  return !p.empty() && (static_cast<unsigned char>(p.front()) & 0xC0) == 0x80;
}
// SentencePiece's space marker U+2581 as the space it stands for.
std::string spaces_for_markers(const std::string& p) {
  std::string out;
  out.reserve(p.size());
  for (size_t i = 0; i < p.size(); ++i) {
    if (p.compare(i, 3, "\xE2\x96\x81") == 0) {
      out += ' ';
      i += 2;
    } else {
      out += p[i];
    }
  }
  return out;
}

bool only_spaces(const std::string& p) {
  return !p.empty() && p.find_first_not_of(" \t") == std::string::npos;
}

bool starts_space(const std::string& p) { return !p.empty() && is_space(p.front()); }
bool ends_space(const std::string& p) { return !p.empty() && is_space(p.back()); }
bool has_newline(const std::string& p) { return p.find('\n') != std::string::npos; }

bool is_structural(const std::string& text) {
  return text.find_first_of(".!?\n") != std::string::npos;
}

// A number, or a capitalized word other than "I" (and its contractions).
bool looks_like_name(const std::string& text, bool sentence_start) {
  size_t b = 0;
  while (b < text.size() && !std::isalnum(static_cast<unsigned char>(text[b])) &&
         static_cast<unsigned char>(text[b]) < 0x80)
    ++b;
  if (text.find_first_of("0123456789") != std::string::npos) return true;
  if (sentence_start || b >= text.size() || !std::isupper(static_cast<unsigned char>(text[b]))) return false;
  const bool lone_i =
      text[b] == 'I' && (b + 1 == text.size() || !std::isalpha(static_cast<unsigned char>(text[b + 1])));
  return !lone_i;
}

}  // namespace

std::vector<Unit> make_units(std::span<const std::string> pieces, std::span<const float> info,
                             std::span<const int32_t> sentence, Granularity granularity) {
  // Whole characters first: byte-fallback tokens that continue a character join the token
  // that began it, and SentencePiece's U+2581 (spelled in bytes when the vocabulary lacks
  // it) reads as the space it stands for.
  std::vector<std::string> text;
  std::vector<int32_t> first;  // each character group's first token
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (continues_char(pieces[i]) && !text.empty()) text.back() += pieces[i];
    else {
      text.push_back(pieces[i]);
      first.push_back(static_cast<int32_t>(i));
    }
  }
  for (std::string& t : text) t = spaces_for_markers(t);
  const size_t n = text.size();
  first.push_back(static_cast<int32_t>(pieces.size()));
  std::vector<Unit> units;
  std::vector<bool> word_unit;  // per unit: a word (else punctuation)
  for (size_t i = 0; i < n; ++i) {
    const bool w = is_word(text[i]);
    bool fresh = granularity == Granularity::kToken || i == 0 || starts_space(text[i]) || ends_space(text[i - 1]) ||
                 has_newline(text[i]) || has_newline(text[i - 1]);
    // A lone space token (Gemma spells " 600" as "▁" "6" "0" "0") leads the word after
    // it, or dropping it would glue two words together.
    if (i > 0 && granularity == Granularity::kWord && only_spaces(text[i - 1]) && units.back().end == first[i] &&
        units.back().begin == first[i - 1] && !has_newline(text[i]))
      fresh = false;
    else if (!fresh && w != is_word(text[i - 1])) {
      if (!w)  // punctuation after a word: its own unit unless a word continues right after it
        fresh = i + 1 == n || starts_space(text[i + 1]) || !is_word(text[i + 1]);
      else  // a word after punctuation that stood alone, unless that punctuation opens
            // it and carries its space (" \"" + "Yes"): dropping one would glue the word on
        fresh = !word_unit.back() &&
                !(units.back().end == first[i] && starts_space(text[i - 1]) && !is_structural(text[i - 1]));
    }
    if (fresh) {
      units.push_back(Unit{first[i], first[i + 1]});
      word_unit.push_back(w);
    } else {
      if (w) word_unit.back() = true;  // a word led by its space or opening punctuation
      units.back().end = first[i + 1];
    }
  }
  // Flags and scores. A word is its sentence's first when no word of that sentence came
  // before; in token granularity a token takes the flags of the word it belongs to.
  int32_t sentence_seen = -1;
  std::string word;
  bool word_start = false;
  for (size_t u = 0; u < units.size(); ++u) {
    Unit& x = units[u];
    std::string t;
    double sum = 0;
    for (int32_t k = x.begin; k < x.end; ++k) {
      t += pieces[static_cast<size_t>(k)];
      sum += info[static_cast<size_t>(k)];
    }
    t = spaces_for_markers(t);
    x.score = static_cast<float>(sum / x.size());
    if (!word_unit[u]) {
      x.structural = is_structural(t);
      continue;
    }
    const int32_t s = sentence.empty() ? 0 : sentence[static_cast<size_t>(x.begin)];
    if (granularity == Granularity::kToken) {
      // The word this token belongs to: from the last token that began one.
      if (starts_space(t) || u == 0 || !word_unit[u - 1]) {
        word.clear();
        word_start = s != sentence_seen;
        for (size_t v = u; v < units.size() && word_unit[v]; ++v) {
          std::string piece;
          for (int32_t k = units[v].begin; k < units[v].end; ++k) piece += pieces[static_cast<size_t>(k)];
          if (v > u && starts_space(piece)) break;
          word += piece;
        }
      }
      x.name = looks_like_name(word, word_start);
    } else {
      x.name = looks_like_name(t, s != sentence_seen);
    }
    sentence_seen = s;
  }
  return units;
}

std::vector<bool> select_units(std::span<const Unit> units, const BudgetOptions& o) {
  std::vector<bool> keep(units.size(), true);
  int64_t kept = 0;
  for (const Unit& u : units) kept += u.size();
  const int64_t target = std::max<int32_t>(o.target_tokens, 0);
  if (kept <= target) return keep;
  std::vector<size_t> order(units.size());
  std::iota(order.begin(), order.end(), size_t{0});
  // Names and numbers, most informative first, protected while they fit their share.
  std::vector<bool> fixed(units.size(), false);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return units[a].score > units[b].score; });
  int64_t name_budget = static_cast<int64_t>(std::floor(o.name_share * static_cast<double>(target)));
  for (size_t i : order) {
    fixed[i] = units[i].structural || units[i].pinned;
    if (!units[i].name || fixed[i] || units[i].size() > name_budget) continue;
    fixed[i] = true;
    name_budget -= units[i].size();
  }
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return units[a].score < units[b].score; });
  for (size_t i : order) {
    if (kept <= target) break;
    if (fixed[i] || kept - units[i].size() < target) continue;
    keep[i] = false;
    kept -= units[i].size();
  }
  return keep;
}

int32_t kept_tokens(std::span<const Unit> units, const std::vector<bool>& keep) {
  int32_t n = 0;
  for (size_t i = 0; i < units.size(); ++i)
    if (keep[i]) n += units[i].size();
  return n;
}

}  // namespace pagoda

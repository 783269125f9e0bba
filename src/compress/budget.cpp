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
  const bool lone_i = text[b] == 'I' && (b + 1 == text.size() || !std::isalpha(static_cast<unsigned char>(text[b + 1])));
  return !lone_i;
}

}  // namespace

std::vector<Unit> make_units(std::span<const std::string> pieces, std::span<const float> info,
                             std::span<const int32_t> sentence, Granularity granularity) {
  const size_t n = pieces.size();
  std::vector<Unit> words;
  std::vector<bool> word_unit;  // per unit of `words`: a word (else punctuation)
  for (size_t i = 0; i < n; ++i) {
    const bool w = is_word(pieces[i]);
    bool fresh = i == 0 || starts_space(pieces[i]) || ends_space(pieces[i - 1]) || has_newline(pieces[i]) ||
                 has_newline(pieces[i - 1]);
    if (continues_char(pieces[i])) {
      fresh = false;  // never split a character
    } else if (!fresh) {
      const bool prev_w = is_word(pieces[i - 1]);
      if (w != prev_w) {
        if (!w)  // punctuation after a word: its own unit unless a word continues right after it
          fresh = i + 1 == n || starts_space(pieces[i + 1]) || !is_word(pieces[i + 1]);
        else  // a word after punctuation that stood alone
          fresh = !word_unit.back();
      }
    }
    if (fresh) {
      words.push_back(Unit{static_cast<int32_t>(i), static_cast<int32_t>(i) + 1});
      word_unit.push_back(w);
    } else {
      words.back().end = static_cast<int32_t>(i) + 1;
    }
  }
  // Flags and scores; a word is a sentence's first when no word of that sentence came before.
  int32_t sentence_seen = -1;
  for (size_t u = 0; u < words.size(); ++u) {
    Unit& x = words[u];
    std::string text;
    double sum = 0;
    for (int32_t t = x.begin; t < x.end; ++t) {
      text += pieces[static_cast<size_t>(t)];
      sum += info[static_cast<size_t>(t)];
    }
    x.score = static_cast<float>(sum / x.size());
    if (!word_unit[u]) {
      x.structural = is_structural(text);
      continue;
    }
    const int32_t s = sentence.empty() ? 0 : sentence[static_cast<size_t>(x.begin)];
    x.name = looks_like_name(text, s != sentence_seen);
    sentence_seen = s;
  }
  if (granularity == Granularity::kWord) return words;
  std::vector<Unit> tokens;
  tokens.reserve(n);
  for (const Unit& x : words)
    for (int32_t t = x.begin; t < x.end; ++t) {
      if (t > x.begin && continues_char(pieces[static_cast<size_t>(t)])) {
        Unit& last = tokens.back();  // a character's bytes stay together, scored by their mean
        last.score = (last.score * static_cast<float>(last.size()) + info[static_cast<size_t>(t)]) /
                     static_cast<float>(last.size() + 1);
        last.end = t + 1;
        continue;
      }
      tokens.push_back(Unit{t, t + 1, info[static_cast<size_t>(t)], x.structural, x.name});
    }
  return tokens;
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
    fixed[i] = units[i].structural;
    if (!units[i].name || units[i].structural || units[i].size() > name_budget) continue;
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

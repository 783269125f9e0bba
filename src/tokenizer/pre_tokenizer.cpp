#include "tokenizer/pre_tokenizer.h"

#include <array>

#include "text/unicode_class.h"
#include "text/utf8.h"

namespace pagoda {
namespace {

// One decoded character of the input. Invalid bytes become kOther with cp = kInvalid,
// so they fall into the punctuation alternative and stay one byte each.
struct Cp {
  uint32_t cp;
  uint32_t offset;
  UnicodeClass cls;
};

uint32_t ascii_lower(uint32_t c) { return (c >= 'A' && c <= 'Z') ? c + 32 : c; }

class Matcher {
 public:
  Matcher(PreTokenizer kind, const std::vector<Cp>& cps) : kind_(kind), c_(cps), n_(cps.size()) {}

  // Length in characters of the regex match at i. Every character is covered by some
  // alternative, so the result is always >= 1 and the words tile the text.
  size_t match(size_t i) const {
    if (size_t m = contraction(i)) return m;
    if (size_t m = letters(i)) return m;
    if (size_t m = numbers(i)) return m;
    if (size_t m = punctuation(i)) return m;
    if (size_t m = whitespace(i)) return m;
    return 1;
  }

 private:
  bool is(size_t i, UnicodeClass c) const { return i < n_ && c_[i].cls == c; }
  bool is_cp(size_t i, uint32_t cp) const { return i < n_ && c_[i].cp == cp; }
  bool is_newline(size_t i) const { return is_cp(i, '\r') || is_cp(i, '\n'); }
  bool llama_like() const { return kind_ != PreTokenizer::kGpt2; }

  // 's 't 're 've 'm 'll 'd; case-insensitive in the Llama 3 / Qwen2 patterns.
  size_t contraction(size_t i) const {
    if (!is_cp(i, '\'') || i + 1 >= n_) return 0;
    auto at = [&](size_t k) -> uint32_t {
      if (k >= n_) return 0;
      return llama_like() ? ascii_lower(c_[k].cp) : c_[k].cp;
    };
    const uint32_t a = at(i + 1), b = at(i + 2);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    return 0;
  }

  size_t letters(size_t i) const {
    size_t j = i;
    if (is(i, UnicodeClass::kLetter)) {
      j = i;
    } else if (is(i + 1, UnicodeClass::kLetter) && prefix_before_letters(i)) {
      j = i + 1;
    } else {
      return 0;
    }
    while (is(j, UnicodeClass::kLetter)) ++j;
    return j - i;
  }

  // GPT-2 allows one space before a letter run; Llama 3 any one character that is not a
  // newline, letter or number ([^\r\n\p{L}\p{N}]?).
  bool prefix_before_letters(size_t i) const {
    if (!llama_like()) return is_cp(i, ' ');
    return !is_newline(i) && !is(i, UnicodeClass::kNumber);  // not a letter: checked by caller
  }

  size_t numbers(size_t i) const {
    switch (kind_) {
      case PreTokenizer::kGpt2: {
        size_t j = i;
        if (is_cp(i, ' ') && is(i + 1, UnicodeClass::kNumber)) j = i + 1;
        if (!is(j, UnicodeClass::kNumber)) return 0;
        while (is(j, UnicodeClass::kNumber)) ++j;
        return j - i;
      }
      case PreTokenizer::kLlama3: {
        size_t j = i;
        while (j < i + 3 && is(j, UnicodeClass::kNumber)) ++j;
        return j - i;
      }
      case PreTokenizer::kQwen2:
        return is(i, UnicodeClass::kNumber) ? 1 : 0;
    }
    return 0;
  }

  // ' ?[^\s\p{L}\p{N}]+', plus '[\r\n]*' in the Llama 3 / Qwen2 patterns.
  size_t punctuation(size_t i) const {
    size_t j = i;
    if (is_cp(i, ' ') && is(i + 1, UnicodeClass::kOther)) j = i + 1;
    if (!is(j, UnicodeClass::kOther)) return 0;
    while (is(j, UnicodeClass::kOther)) ++j;
    if (llama_like()) {
      while (is_newline(j)) ++j;
    }
    return j - i;
  }

  size_t whitespace(size_t i) const {
    if (!is(i, UnicodeClass::kSpace)) return 0;
    size_t end = i;
    while (is(end, UnicodeClass::kSpace)) ++end;
    if (llama_like()) {
      // \s*[\r\n]+ : greedy, so it reaches the last newline of the run.
      for (size_t k = end; k > i; --k) {
        if (is_newline(k - 1)) return k - i;
      }
    }
    // \s+(?!\S) : at the end of the text the whole run; before a non-space it gives back
    // the last space (which then prefixes the next word); \s+ when only one is left.
    if (end == n_ || end - i == 1) return end - i;
    return end - 1 - i;
  }

  PreTokenizer kind_;
  const std::vector<Cp>& c_;
  size_t n_;
};

}  // namespace

void pre_tokenize(PreTokenizer kind, std::string_view text, std::vector<WordSpan>& out) {
  std::vector<Cp> cps;
  cps.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const utf8::Char ch = utf8::decode(text, i);
    const UnicodeClass cls = ch.cp == utf8::kInvalid ? UnicodeClass::kOther : unicode_class(ch.cp);
    cps.push_back({ch.cp, static_cast<uint32_t>(i), cls});
    i += ch.len;
  }
  const Matcher m(kind, cps);
  for (size_t i = 0; i < cps.size();) {
    const size_t len = m.match(i);
    const size_t end = i + len;
    const uint32_t end_byte = end < cps.size() ? cps[end].offset : static_cast<uint32_t>(text.size());
    out.push_back({cps[i].offset, end_byte});
    i = end;
  }
}

}  // namespace pagoda

#include "tokenizer/regex_split.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <fmt/format.h>

namespace pagoda {

struct RegexSplitter::Compiled {
  pcre2_code* code = nullptr;
  ~Compiled() { pcre2_code_free(code); }
};

Result<RegexSplitter> RegexSplitter::compile(const std::vector<std::string_view>& patterns) {
  RegexSplitter s;
  for (std::string_view p : patterns) {
    int err = 0;
    PCRE2_SIZE at = 0;
    auto c = std::make_shared<Compiled>();
    c->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(p.data()), p.size(),
                            PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &at, nullptr);
    if (c->code == nullptr) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof(msg));
      return error("pre-tokenizer regex does not compile at offset {}: {} ({})", static_cast<size_t>(at),
                   reinterpret_cast<const char*>(msg), p);
    }
    // Without JIT (a build or a CPU PCRE2 has none for) the interpreter gives the same
    // matches, only slower.
    pcre2_jit_compile(c->code, PCRE2_JIT_COMPLETE);
    s.patterns_.push_back(std::move(c));
  }
  return s;
}

namespace {

// The byte after the UTF-8 character that starts at i (one byte for an invalid one).
size_t next_char(std::string_view s, size_t i) {
  ++i;
  while (i < s.size() && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) ++i;
  return i;
}

}  // namespace

void RegexSplitter::split(std::string_view text, std::vector<WordSpan>& out) const {
  std::vector<WordSpan> cur{{0, static_cast<uint32_t>(text.size())}}, next;
  if (text.empty()) return;
  for (const auto& p : patterns_) {
    pcre2_match_data* md = pcre2_match_data_create_from_pattern(p->code, nullptr);
    next.clear();
    for (const WordSpan& w : cur) {
      const std::string_view piece = text.substr(w.begin, w.end - w.begin);
      const auto* subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
      size_t start = 0, last = 0;
      while (start <= piece.size()) {
        const int rc = pcre2_match(p->code, subject, piece.size(), start, 0, md, nullptr);
        if (rc < 0) break;  // no further match (or a match error: the rest stays one gap)
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
        const size_t ms = ov[0], me = ov[1];
        if (me == ms) {  // an empty match splits nothing
          if (ms >= piece.size()) break;
          start = next_char(piece, ms);
          continue;
        }
        if (ms > last) next.push_back({w.begin + static_cast<uint32_t>(last), w.begin + static_cast<uint32_t>(ms)});
        next.push_back({w.begin + static_cast<uint32_t>(ms), w.begin + static_cast<uint32_t>(me)});
        last = start = me;
      }
      if (last < piece.size()) next.push_back({w.begin + static_cast<uint32_t>(last), w.end});
    }
    pcre2_match_data_free(md);
    cur.swap(next);
  }
  out.insert(out.end(), cur.begin(), cur.end());
}

}  // namespace pagoda

#include "tokenizer/ugm_tokenizer.h"

#include <algorithm>
#include <cfloat>

#include "tokenizer/piece_index.h"

namespace pagoda {
namespace {

constexpr float kUnknownPenalty = 10.0f;  // SentencePiece's kUnkPenalty
constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";  // U+FFFD

// Bytes of the character at s[i] as llama.cpp's unicode_cpt_from_utf8 accepts it: a lead
// byte followed by enough continuation bytes (overlong forms and surrogates pass); 0 for
// anything else.
size_t lenient_char_len(std::string_view s, size_t i) {
  const auto b = static_cast<unsigned char>(s[i]);
  size_t len;
  if (b < 0x80) return 1;
  if (b < 0xC0) return 0;
  if (b < 0xE0) len = 2;
  else if (b < 0xF0) len = 3;
  else if (b < 0xF8) len = 4;
  else return 0;
  if (i + len > s.size()) return 0;
  for (size_t k = 1; k < len; ++k) {
    if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return 0;
  }
  return len;
}

// The Viterbi step: a character's length from its lead byte alone (llama.cpp's
// unicode_len_utf8), clipped to the text.
size_t lead_len(std::string_view s, size_t i) {
  static constexpr uint8_t kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return std::min<size_t>(kLen[static_cast<unsigned char>(s[i]) >> 4], s.size() - i);
}

}  // namespace

struct UgmTokenizer::Best {
  int32_t id;      // the token ending here
  uint32_t start;  // where it starts
  double score;    // of the best tokenization of the text up to here
};

Result<std::unique_ptr<Tokenizer>> UgmTokenizer::make(Vocab vocab) {
  if (vocab.unk < 0) return error("Unigram vocabulary has no unknown token (tokenizer.ggml.unknown_token_id)");
  PrecompiledCharsmap charsmap;
  if (!vocab.precompiled_charsmap.empty()) {
    Result<PrecompiledCharsmap> parsed = PrecompiledCharsmap::parse(vocab.precompiled_charsmap);
    if (!parsed) return error("tokenizer.ggml.precompiled_charsmap: {}", parsed.status().message());
    charsmap = std::move(parsed).value();
  }
  return std::unique_ptr<Tokenizer>(new UgmTokenizer(std::move(vocab), std::move(charsmap)));
}

UgmTokenizer::UgmTokenizer(Vocab vocab, PrecompiledCharsmap charsmap)
    : Tokenizer(std::move(vocab)), charsmap_(std::move(charsmap)), special_(vocab_) {
  std::vector<std::pair<std::string_view, int32_t>> pieces, user_defined;
  float min_score = FLT_MAX;
  for (size_t i = 0; i < vocab_.pieces.size(); ++i) {
    const auto id = static_cast<int32_t>(i);
    const TokenType t = vocab_.type(id);
    if (t == TokenType::kNormal) min_score = std::min(min_score, vocab_.scores.empty() ? 0.0f : vocab_.scores[i]);
    if (t == TokenType::kNormal || t == TokenType::kUserDefined || t == TokenType::kUnused) {
      pieces.emplace_back(vocab_.pieces[i], id);
    }
    if (t == TokenType::kUserDefined) user_defined.emplace_back(vocab_.pieces[i], id);
  }
  unknown_score_ = min_score - kUnknownPenalty;
  pieces_ = PieceTrie(std::move(pieces));
  user_defined_ = PieceTrie(std::move(user_defined));
}

double UgmTokenizer::score(int32_t id) const {
  // User-defined pieces score 0, above every normal piece (scores are log probabilities).
  if (vocab_.type(id) == TokenType::kUserDefined || vocab_.scores.empty()) return 0.0;
  return vocab_.scores[id];
}

std::vector<int32_t> UgmTokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 2);
  if (add_special && vocab_.add_bos && vocab_.bos >= 0) out.push_back(vocab_.bos);
  std::string normalized;  // reused by every stretch of text
  std::vector<Best> lattice;
  for (const Fragment& f : special_.split(text, parse_special)) {
    if (f.token >= 0) {
      out.push_back(f.token);
      continue;
    }
    normalize(text.substr(f.begin, f.end - f.begin), normalized);
    viterbi(normalized, lattice, out);
  }
  if (add_special && vocab_.add_eos && vocab_.eos >= 0) out.push_back(vocab_.eos);
  return out;
}

std::pair<std::string_view, size_t> UgmTokenizer::normalize_prefix(std::string_view text, size_t pos) const {
  const std::string_view rest = text.substr(pos);
  // llama.cpp copies the longest prefix that runs along a user-defined piece, whether or
  // not the whole piece is there.
  if (const size_t n = user_defined_.longest_path(rest); n > 0) return {rest.substr(0, n), n};
  if (const PrecompiledCharsmap::Match m = charsmap_.longest_match(rest); m.consumed > 0) {
    return {m.replacement, m.consumed};
  }
  if (const size_t n = lenient_char_len(text, pos); n > 0) return {rest.substr(0, n), n};
  return {kReplacementChar, 1};
}

void UgmTokenizer::normalize(std::string_view text, std::string& out) const {
  out.clear();
  const std::string_view space = vocab_.escape_whitespaces ? kSpaceMark : std::string_view(" ");
  const bool prepend = !vocab_.treat_whitespace_as_suffix && vocab_.add_space_prefix;
  const bool append = vocab_.treat_whitespace_as_suffix && vocab_.add_space_prefix;
  const bool merge = vocab_.remove_extra_whitespaces;
  // As llama.cpp: with merging, every word gets one space before it (the first word
  // too, whatever add_space_prefix says) and spaces after the last word are dropped;
  // without, each space is kept and add_space_prefix adds one before the first word
  // (not to a text of spaces only).
  bool prepended = false, in_word = false;
  for (size_t pos = 0; pos < text.size();) {
    const auto [piece, consumed] = normalize_prefix(text, pos);
    for (char c : piece) {
      if (c != ' ') {
        if (!in_word) {
          in_word = true;
          if ((prepend && !prepended) || merge) {
            out += space;
            prepended = true;
          }
        }
        out.push_back(c);
      } else {
        in_word = false;
        if (!merge) out += space;
      }
    }
    pos += consumed;
  }
  if (append) out += space;
}

void UgmTokenizer::viterbi(const std::string& s, std::vector<Best>& lattice, std::vector<int32_t>& out) const {
  const size_t n = s.size();
  if (n == 0) return;
  const int32_t unk = vocab_.unk;
  lattice.assign(n + 1, Best{unk, 0, -DBL_MAX});
  lattice[0] = Best{unk, 0, 0.0};
  for (size_t pos = 0; pos < n;) {
    const size_t char_len = lead_len(s, pos);
    const double base = lattice[pos].score;
    bool whole_char = false;  // a piece spells exactly this character
    uint32_t node = PieceTrie::kRoot;
    for (size_t end = pos; end < n;) {
      node = pieces_.child(node, static_cast<uint8_t>(s[end++]));
      if (node == PieceTrie::kNone) break;
      const int32_t id = pieces_.value(node);
      if (id < 0) continue;
      if (end - pos == char_len) whole_char = true;
      const double candidate = base + score(id);
      // Strictly greater: among equal scores the first found (shortest piece, earliest
      // start) stays, as in llama.cpp.
      if (candidate > lattice[end].score) lattice[end] = {id, static_cast<uint32_t>(pos), candidate};
    }
    if (!whole_char) {
      const double candidate = base + unknown_score_;
      Best& b = lattice[pos + char_len];
      if (candidate > b.score) b = {unk, static_cast<uint32_t>(pos), candidate};
    }
    pos += char_len;
  }
  // Backtrack from the end; a run of unknown characters is one unknown token.
  const size_t first = out.size();
  bool prev_unknown = false;
  for (size_t end = n;;) {
    const Best& b = lattice[end];
    const bool unknown = b.id == unk;
    if (!(prev_unknown && unknown)) out.push_back(b.id);
    if (b.start == 0) break;
    prev_unknown = unknown;
    end = b.start;
  }
  std::reverse(out.begin() + static_cast<std::ptrdiff_t>(first), out.end());
}

std::string UgmTokenizer::text_piece_bytes(const std::string& piece) const { return space_marks_to_spaces(piece); }

}  // namespace pagoda

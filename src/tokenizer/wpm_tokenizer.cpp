#include "tokenizer/wpm_tokenizer.h"

#include <algorithm>

#include "text/case_map.h"
#include "text/unicode_props.h"
#include "text/utf8.h"

namespace pagoda {

Result<std::unique_ptr<Tokenizer>> WpmTokenizer::make(Vocab vocab) {
  if (vocab.unk < 0) return error("WordPiece vocabulary has no unknown token (tokenizer.ggml.unknown_token_id)");
  return std::unique_ptr<Tokenizer>(new WpmTokenizer(std::move(vocab)));
}

WpmTokenizer::WpmTokenizer(Vocab vocab)
    : Tokenizer(std::move(vocab)), index_(build_piece_index(vocab_)), special_(vocab_) {
  for (const std::string& p : vocab_.pieces) max_piece_bytes_ = std::max(max_piece_bytes_, p.size());
}

std::vector<int32_t> WpmTokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
  std::vector<int32_t> out;
  if (add_special && vocab_.add_bos && vocab_.bos >= 0) out.push_back(vocab_.bos);
  for (const Fragment& f : special_.split(text, parse_special)) {
    if (f.token >= 0) out.push_back(f.token);
    else encode_text(text.substr(f.begin, f.end - f.begin), out);
  }
  if (add_special && vocab_.add_eos && vocab_.eos >= 0) out.push_back(vocab_.eos);
  return out;
}

// BertNormalizer then BertPreTokenizer, one character at a time.
void WpmTokenizer::encode_text(std::string_view text, std::vector<int32_t>& out) const {
  std::vector<uint32_t> cps;
  for (size_t i = 0; i < text.size();) {
    const utf8::Char ch = utf8::decode(text, i);
    i += ch.len;
    if (ch.cp == utf8::kInvalid) continue;  // not text: dropped like U+FFFD
    if (vocab_.strip_accents) text::append_nfd(cps, ch.cp);
    else cps.push_back(ch.cp);
  }
  std::string word;
  auto finish = [&] {
    if (!word.empty()) encode_word(word, out);
    word.clear();
  };
  for (uint32_t cp : cps) {
    if (text::is_whitespace(cp)) {
      finish();
      continue;
    }
    if (cp == 0 || cp == 0xFFFD || text::is_control(cp)) continue;
    if (vocab_.strip_accents && text::is_nonspacing_mark(cp)) continue;
    const bool alone = text::is_punctuation(cp) || text::is_cjk_ideograph(cp);
    if (alone) finish();
    if (vocab_.lowercase) text::append_lower(word, cp);
    else utf8::append(word, cp);
    if (alone) finish();
  }
  finish();
}

// Greedy longest match from the left; a word with a part no piece covers becomes the
// unknown token.
void WpmTokenizer::encode_word(const std::string& word, std::vector<int32_t>& out) const {
  // Hugging Face's max_input_chars_per_word: longer words are unknown outright.
  constexpr size_t kMaxChars = 100;
  size_t chars = 0;
  for (unsigned char c : word) chars += (c & 0xC0) != 0x80;
  if (chars > kMaxChars) {
    out.push_back(vocab_.unk);
    return;
  }
  std::string w(kSpaceMark);
  w += word;
  const size_t mark = out.size();
  for (size_t i = 0; i < w.size();) {
    int32_t id = -1;
    size_t j = std::min(w.size(), i + max_piece_bytes_);
    for (; j > i; --j) {
      if (j < w.size() && (static_cast<unsigned char>(w[j]) & 0xC0) == 0x80) continue;  // mid-character
      id = find_piece(index_, std::string_view(w).substr(i, j - i));
      if (id >= 0) break;
    }
    if (id < 0) {
      out.resize(mark);
      out.push_back(vocab_.unk);
      return;
    }
    out.push_back(id);
    i = j;
  }
}

std::string WpmTokenizer::text_piece_bytes(const std::string& piece) const {
  if (piece.compare(0, kSpaceMark.size(), kSpaceMark) != 0) return piece;
  std::string out(1, ' ');
  out.append(piece, kSpaceMark.size(), std::string::npos);
  return out;
}

}  // namespace pagoda

#include "tokenizer/spm_tokenizer.h"

#include <queue>

#include "text/utf8.h"

namespace pagoda {
namespace {


// A stretch of the escaped text. Merging only ever joins neighbours, so every symbol is
// a contiguous substring and needs no storage of its own.
struct Symbol {
  uint32_t begin, len;
  int32_t prev, next;
};

struct Bigram {
  float score;
  int32_t left, right;
  uint32_t len;  // left.len + right.len when queued; a mismatch later means it is stale
  bool operator<(const Bigram& o) const {
    // Highest score first; among equals the leftmost, as SentencePiece does.
    if (score != o.score) return score < o.score;
    return left > o.left;
  }
};

}  // namespace

Result<std::unique_ptr<Tokenizer>> SpmTokenizer::make(Vocab vocab) {
  return std::unique_ptr<Tokenizer>(new SpmTokenizer(std::move(vocab)));
}

SpmTokenizer::SpmTokenizer(Vocab vocab)
    : Tokenizer(std::move(vocab)), index_(build_piece_index(vocab_)), special_(vocab_) {
  byte_token_.fill(-1);
  for (size_t id = 0; id < vocab_.pieces.size(); ++id) {
    if (vocab_.type(static_cast<int32_t>(id)) != TokenType::kByte) continue;
    const int b = parse_byte_piece(vocab_.pieces[id]);
    if (b >= 0 && byte_token_[b] < 0) byte_token_[b] = static_cast<int32_t>(id);
  }
}

std::vector<int32_t> SpmTokenizer::encode(std::string_view text, bool add_special,
                                          bool parse_special) const {
  return encode_from(text, add_special, parse_special, /*starts_input=*/true);
}

std::vector<int32_t> SpmTokenizer::encode_continuation(std::string_view text) const {
  return encode_from(text, /*add_special=*/false, /*parse_special=*/true, /*starts_input=*/false);
}

std::vector<int32_t> SpmTokenizer::encode_from(std::string_view text, bool add_special, bool parse_special,
                                               bool starts_input) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 2);
  if (add_special && vocab_.add_bos && vocab_.bos >= 0) out.push_back(vocab_.bos);
  // The dummy space prefix goes before text that starts the input or follows a control
  // token, as llama.cpp does, so "<start_of_turn>user" tokenizes like "user" at the start.
  // Not after user-defined tokens: those are ordinary text to SentencePiece, and a prefix
  // there would turn "\t\ttest" into tabs + " test" (llama.cpp issue 8338).
  bool after_special = starts_input;
  for (const Fragment& f : special_.split(text, parse_special)) {
    if (f.token >= 0) {
      out.push_back(f.token);
      after_special = vocab_.type(f.token) != TokenType::kUserDefined;
    } else {
      encode_text(text.substr(f.begin, f.end - f.begin), vocab_.add_space_prefix && after_special,
                  out);
      after_special = false;
    }
  }
  if (add_special && vocab_.add_eos && vocab_.eos >= 0) out.push_back(vocab_.eos);
  return out;
}

void SpmTokenizer::encode_text(std::string_view text, bool space_prefix,
                               std::vector<int32_t>& out) const {
  std::string s;
  s.reserve(text.size() + 3 + text.size() / 4);
  if (space_prefix) s += kSpaceMark;
  append_space_marks(text, s);

  std::vector<Symbol> sym;
  sym.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const uint32_t len = utf8::decode(s, i).len;
    const auto n = static_cast<int32_t>(sym.size());
    sym.push_back({static_cast<uint32_t>(i), len, n - 1, -1});
    if (n > 0) sym[n - 1].next = n;
    i += len;
  }

  std::priority_queue<Bigram> queue;
  auto try_add = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const uint32_t len = sym[left].len + sym[right].len;
    const int32_t id = find_piece(index_, std::string_view(s).substr(sym[left].begin, len));
    if (id < 0 || !is_text_token(vocab_, id)) return;
    queue.push({score(id), left, right, len});
  };
  for (int32_t i = 1; i < static_cast<int32_t>(sym.size()); ++i) try_add(i - 1, i);

  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    Symbol& l = sym[b.left];
    Symbol& r = sym[b.right];
    if (l.len == 0 || r.len == 0 || l.len + r.len != b.len) continue;
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = b.left;
    try_add(l.prev, b.left);
    try_add(b.left, l.next);
  }

  for (int32_t i = sym.empty() ? -1 : 0; i >= 0; i = sym[i].next) {
    emit_symbol(std::string_view(s).substr(sym[i].begin, sym[i].len), out);
  }
}

void SpmTokenizer::emit_symbol(std::string_view piece, std::vector<int32_t>& out) const {
  const int32_t id = find_piece(index_, piece);
  if (id >= 0 && is_text_token(vocab_, id)) {
    out.push_back(id);
    return;
  }
  // No piece for this character (or an invalid byte): spell it as byte tokens, or as one
  // unknown token when the vocabulary cannot spell every byte of it.
  bool all_bytes = true;
  for (unsigned char c : piece) all_bytes = all_bytes && byte_token_[c] >= 0;
  if (all_bytes) {
    for (unsigned char c : piece) out.push_back(byte_token_[c]);
  } else if (vocab_.unk >= 0) {
    out.push_back(vocab_.unk);
  }
}

std::string SpmTokenizer::text_piece_bytes(const std::string& piece) const { return space_marks_to_spaces(piece); }

}  // namespace pagoda

#include "tokenizer/bpe_tokenizer.h"

#include <algorithm>
#include <queue>

#include "tokenizer/byte_unicode.h"
#include "text/utf8.h"

namespace pagoda {
namespace {

// "<0xAB>": how raw-UTF-8 vocabularies spell a byte token.
std::string byte_piece_name(int b) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  return std::string{'<', '0', 'x', kHex[b >> 4], kHex[b & 15], '>'};
}

struct Symbol {
  int32_t id;  // -1 once merged into its left neighbour
  int32_t prev, next;
};

struct Bigram {
  int32_t rank;
  int32_t left, right;
  int32_t left_id, right_id;  // to recognise a pair that merging has since changed
  int32_t result;
  bool operator<(const Bigram& o) const {
    // Lowest rank first; among equals the leftmost (std::priority_queue is a max-heap).
    if (rank != o.rank) return rank > o.rank;
    return left > o.left;
  }
};

std::string map_bytes(std::string_view bytes) {
  std::string s;
  s.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) utf8::append(s, byte_to_codepoint(c));
  return s;
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> BpeTokenizer::make(Vocab vocab) {
  auto pre = WordSplitter::for_name(vocab.pre);
  if (!pre) return pre.status();
  return std::unique_ptr<Tokenizer>(new BpeTokenizer(std::move(vocab), std::move(pre.value())));
}

BpeTokenizer::BpeTokenizer(Vocab vocab, WordSplitter pre)
    : Tokenizer(std::move(vocab)),
      pre_(std::move(pre)),
      ignore_merges_(pre_.ignore_merges()),
      raw_utf8_(pre_.raw_utf8()),
      index_(build_piece_index(vocab_)),
      special_(vocab_) {
  for (int b = 0; b < 256; ++b) {
    std::string piece;
    if (raw_utf8_) piece = byte_piece_name(b);
    else utf8::append(piece, byte_to_codepoint(static_cast<uint8_t>(b)));
    byte_token_[b] = find_piece(index_, piece);
  }
  merges_.reserve(vocab_.merges.size());
  std::string joined;
  for (size_t rank = 0; rank < vocab_.merges.size(); ++rank) {
    const std::string& m = vocab_.merges[rank];
    const size_t sp = m.find(' ', 1);
    if (sp == std::string::npos) continue;
    const std::string_view a = std::string_view(m).substr(0, sp);
    const std::string_view b = std::string_view(m).substr(sp + 1);
    joined.assign(a);
    joined.append(b);
    const int32_t ia = find_piece(index_, a), ib = find_piece(index_, b);
    const int32_t ir = find_piece(index_, joined);
    // A merge whose parts or result are not tokens can never apply to token symbols.
    if (ia < 0 || ib < 0 || ir < 0) continue;
    merges_.try_emplace(pair_key(ia, ib), Merge{static_cast<int32_t>(rank), ir});
  }
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text, bool add_special,
                                          bool parse_special) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 2);
  if (add_special && vocab_.add_bos && vocab_.bos >= 0) out.push_back(vocab_.bos);
  std::vector<WordSpan> words;
  std::string escaped;
  for (const Fragment& f : special_.split(text, parse_special)) {
    if (f.token >= 0) {
      out.push_back(f.token);
      continue;
    }
    std::string_view part = text.substr(f.begin, f.end - f.begin);
    if (raw_utf8_) {
      // Spaces are written "▁" before splitting, as the normalizer of these vocabularies does.
      escaped.clear();
      append_space_marks(part, escaped);
      part = escaped;
    }
    words.clear();
    pre_.split(part, words);
    for (const WordSpan& w : words) encode_word(part.substr(w.begin, w.end - w.begin), out);
  }
  if (add_special && vocab_.add_eos && vocab_.eos >= 0) out.push_back(vocab_.eos);
  return out;
}

void BpeTokenizer::push_token(int32_t id, std::vector<int32_t>& out) const {
  if (id >= 0) {
    out.push_back(id);
  } else if (vocab_.unk >= 0) {
    out.push_back(vocab_.unk);  // a byte the vocabulary cannot spell
  }
}

void BpeTokenizer::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (!raw_utf8_ && word.size() == 1) {
    push_token(byte_token_[static_cast<unsigned char>(word[0])], out);
    return;
  }
  // Words taken whole when they are a token: Llama 3's (ignore_merges), and Gemma 4's
  // runs of newlines (its merges do not reach every run the vocabulary has).
  if (ignore_merges_ || (raw_utf8_ && word.find_first_not_of('\n') == std::string_view::npos)) {
    const int32_t id = raw_utf8_ ? find_piece(index_, word) : find_piece(index_, map_bytes(word));
    if (id >= 0 && is_text_token(vocab_, id)) {
      out.push_back(id);
      return;
    }
  }

  // The first symbols: one per byte (in GPT-2's alphabet), or per UTF-8 character for
  // raw-UTF-8 vocabularies, where a character with no piece (-1) never merges and is
  // written as its <0xXX> byte tokens.
  std::vector<Symbol> sym;
  std::vector<uint32_t> at;  // raw UTF-8 only: byte offset of each first symbol, then the end
  sym.reserve(word.size());
  if (raw_utf8_) at.reserve(word.size() + 1);
  for (size_t i = 0; i < word.size();) {
    const auto k = static_cast<int32_t>(sym.size());
    if (!raw_utf8_) {
      sym.push_back({byte_token_[static_cast<unsigned char>(word[i])], k - 1, k + 1});
      ++i;
      continue;
    }
    const size_t len = std::max<size_t>(1, utf8::decode(word, i).len);
    sym.push_back({find_piece(index_, word.substr(i, len)), k - 1, k + 1});
    at.push_back(static_cast<uint32_t>(i));
    i += len;
  }
  sym.back().next = -1;
  if (raw_utf8_) at.push_back(static_cast<uint32_t>(word.size()));
  const auto n = static_cast<int32_t>(sym.size());
  std::priority_queue<Bigram> queue;
  auto try_add = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0 || sym[left].id < 0 || sym[right].id < 0) return;
    auto it = merges_.find(pair_key(sym[left].id, sym[right].id));
    if (it == merges_.end()) return;
    queue.push({it->second.rank, left, right, sym[left].id, sym[right].id, it->second.result});
  };
  for (int32_t i = 1; i < n; ++i) try_add(i - 1, i);

  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    Symbol& l = sym[b.left];
    if (l.id != b.left_id || l.next != b.right || sym[b.right].id != b.right_id) continue;
    Symbol& r = sym[b.right];
    l.id = b.result;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = b.left;
    r.id = -1;
    r.next = r.prev = -1;
    try_add(l.prev, b.left);
    try_add(b.left, l.next);
  }
  for (int32_t i = 0; i >= 0; i = sym[i].next) {
    if (sym[i].id < 0 && raw_utf8_) {
      for (uint32_t k = at[i]; k < at[i + 1]; ++k) push_token(byte_token_[static_cast<unsigned char>(word[k])], out);
    } else {
      push_token(sym[i].id, out);
    }
  }
}

std::string BpeTokenizer::text_piece_bytes(const std::string& piece) const {
  if (raw_utf8_) return space_marks_to_spaces(piece);
  std::string out;
  out.reserve(piece.size());
  for (size_t i = 0; i < piece.size();) {
    const utf8::Char ch = utf8::decode(piece, i);
    const int b = ch.cp == utf8::kInvalid ? -1 : codepoint_to_byte(ch.cp);
    if (b >= 0) {
      out.push_back(static_cast<char>(b));
    } else {
      out.append(piece, i, ch.len);  // not in the byte alphabet: keep it as written
    }
    i += ch.len;
  }
  return out;
}

}  // namespace pagoda

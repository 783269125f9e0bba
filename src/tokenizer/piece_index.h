// Piece text -> token id, and the spelling helpers, shared by the tokenizer families. Views point into Vocab::pieces, so
// the index must live no longer than the Vocab it was built from and the Vocab must not
// change meanwhile (Tokenizer owns both and is immutable).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "tokenizer/vocab.h"

namespace pagoda {

using PieceIndex = std::unordered_map<std::string_view, int32_t>;

// SentencePiece's "▁" (U+2581), how SPM, WordPiece and raw-UTF-8 BPE vocabularies write a
// space inside their pieces.
inline constexpr std::string_view kSpaceMark = "\xE2\x96\x81";

// `text` with every space written kSpaceMark (appended to out).
inline void append_space_marks(std::string_view text, std::string& out) {
  for (char c : text) {
    if (c == ' ') out += kSpaceMark;
    else out.push_back(c);
  }
}

// A piece's text with every kSpaceMark turned back into a space.
inline std::string space_marks_to_spaces(std::string_view piece) {
  std::string out;
  out.reserve(piece.size());
  for (size_t i = 0; i < piece.size();) {
    if (piece.compare(i, kSpaceMark.size(), kSpaceMark) == 0) {
      out.push_back(' ');
      i += kSpaceMark.size();
    } else {
      out.push_back(piece[i++]);
    }
  }
  return out;
}

// When two tokens spell the same text, the lower id wins.
inline PieceIndex build_piece_index(const Vocab& v) {
  PieceIndex index;
  index.reserve(v.pieces.size());
  for (size_t id = 0; id < v.pieces.size(); ++id) {
    index.emplace(v.pieces[id], static_cast<int32_t>(id));
  }
  return index;
}

inline int32_t find_piece(const PieceIndex& index, std::string_view text) {
  auto it = index.find(text);
  return it == index.end() ? -1 : it->second;
}

// Tokens that ordinary text may turn into by merging: not control, unknown, byte or
// unused tokens, which only come from special handling.
inline bool is_text_token(const Vocab& v, int32_t id) {
  const TokenType t = v.type(id);
  return t == TokenType::kNormal || t == TokenType::kUserDefined || t == TokenType::kUndefined;
}

// The byte a "<0xAB>" piece stands for, or -1.
inline int parse_byte_piece(std::string_view p) {
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  if (p.size() != 6 || p.substr(0, 3) != "<0x" || p[5] != '>') return -1;
  const int hi = hex(p[3]), lo = hex(p[4]);
  return (hi < 0 || lo < 0) ? -1 : hi * 16 + lo;
}

// The bytes of a token whose type is not plain text (control, unknown, unused, user-
// defined, byte), shared by both tokenizer families; nullopt for normal tokens, whose
// spelling each family decodes its own way. User-defined tokens are stored as plain text.
inline std::optional<std::string> non_text_token_bytes(TokenType type, const std::string& piece, bool render_special) {
  switch (type) {
    case TokenType::kControl:
    case TokenType::kUnknown:
      return render_special ? piece : std::string();
    case TokenType::kUnused:
      return std::string();
    case TokenType::kUserDefined:
      return piece;
    case TokenType::kByte: {
      const int b = parse_byte_piece(piece);
      return b < 0 ? std::string() : std::string(1, static_cast<char>(b));
    }
    case TokenType::kNormal:
    case TokenType::kUndefined:
      break;
  }
  return std::nullopt;
}

}  // namespace pagoda

// Small hand-built vocabularies for the tokenizer unit tests, so expected ids can be
// worked out by hand. Ids are stable: tests refer to them through id_of().
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/byte_unicode.h"
#include "tokenizer/tokenizer.h"
#include "text/utf8.h"

namespace pagoda::test {

inline int32_t id_of(const Vocab& v, const std::string& piece) {
  for (size_t i = 0; i < v.pieces.size(); ++i) {
    if (v.pieces[i] == piece) return static_cast<int32_t>(i);
  }
  ADD_FAILURE() << "no piece " << piece;
  return -1;
}

inline std::string byte_piece(int b) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "<0x%02X>", b);
  return buf;
}

// SentencePiece layout: 0 <unk>, 1 <s>, 2 </s>, 3..258 byte tokens, then `normal`
// pieces with their scores. with_bytes = false leaves the byte tokens out.
inline Vocab spm_vocab(const std::vector<std::pair<std::string, float>>& normal,
                       bool with_bytes = true) {
  Vocab v;
  v.kind = TokenizerKind::kSentencePiece;
  auto add = [&](std::string p, float s, TokenType t) {
    v.pieces.push_back(std::move(p));
    v.scores.push_back(s);
    v.types.push_back(t);
  };
  add("<unk>", 0, TokenType::kUnknown);
  add("<s>", 0, TokenType::kControl);
  add("</s>", 0, TokenType::kControl);
  if (with_bytes) {
    for (int b = 0; b < 256; ++b) add(byte_piece(b), 0, TokenType::kByte);
  }
  for (const auto& [p, s] : normal) add(p, s, TokenType::kNormal);
  v.unk = 0;
  v.bos = 1;
  v.eos = 2;
  v.add_bos = true;
  v.add_space_prefix = true;
  return v;
}

// The GPT-2 alphabet character(s) for raw bytes, as byte-level pieces are written.
inline std::string bl(std::string_view bytes) {
  std::string s;
  for (unsigned char c : bytes) utf8::append(s, byte_to_codepoint(c));
  return s;
}

// Byte-level layout: ids 0..255 are the single bytes (id == byte value), then one piece
// per merge (in merge order), then `extra` pieces. Merges are given as raw byte strings
// "left right"; they are stored in the GPT-2 alphabet like a real vocabulary.
inline Vocab bpe_vocab(const std::vector<std::pair<std::string, std::string>>& merges,
                       const std::string& pre = "default",
                       const std::vector<std::string>& extra = {}) {
  Vocab v;
  v.kind = TokenizerKind::kByteLevelBpe;
  v.pre = pre;
  v.add_space_prefix = false;
  for (int b = 0; b < 256; ++b) v.pieces.push_back(bl(std::string(1, static_cast<char>(b))));
  for (const auto& [l, r] : merges) {
    v.merges.push_back(bl(l) + " " + bl(r));
    v.pieces.push_back(bl(l + r));
  }
  for (const auto& e : extra) v.pieces.push_back(bl(e));
  v.types.assign(v.pieces.size(), TokenType::kNormal);
  return v;
}

inline std::unique_ptr<Tokenizer> make(Vocab v) {
  auto t = Tokenizer::create(std::move(v));
  EXPECT_TRUE(t.is_ok()) << t.status().message();
  return t.is_ok() ? std::move(t).value() : nullptr;
}

}  // namespace pagoda::test

#include "tokenizer/tokenizer.h"

#include <algorithm>

#include "gguf/gguf_file.h"
#include "tokenizer/bpe_tokenizer.h"
#include "tokenizer/piece_index.h"
#include "tokenizer/spm_tokenizer.h"
#include "tokenizer/ugm_tokenizer.h"
#include "tokenizer/wpm_tokenizer.h"

namespace pagoda {
namespace {

Status validate(const Vocab& v) {
  const size_t n = v.pieces.size();
  if (n == 0) return error("tokenizer vocabulary has no tokens");
  if (n > static_cast<size_t>(INT32_MAX)) return error("tokenizer vocabulary is too large ({})", n);
  if (!v.scores.empty() && v.scores.size() != n) {
    return error("tokenizer vocabulary has {} scores for {} tokens", v.scores.size(), n);
  }
  if (!v.types.empty() && v.types.size() != n) {
    return error("tokenizer vocabulary has {} token types for {} tokens", v.types.size(), n);
  }
  const std::pair<const char*, int32_t> ids[] = {
      {"bos", v.bos}, {"eos", v.eos}, {"unk", v.unk}, {"pad", v.pad}, {"eot", v.eot}};
  for (const auto& [name, id] : ids) {
    if (id < -1 || id >= static_cast<int64_t>(n)) {
      return error("tokenizer {} id {} is outside the vocabulary (size {})", name, id, n);
    }
  }
  for (int32_t id : v.eog) {
    if (id < 0 || id >= static_cast<int64_t>(n)) {
      return error("tokenizer end-of-generation id {} is outside the vocabulary (size {})", id, n);
    }
  }
  return Status::ok();
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> Tokenizer::create(Vocab vocab) {
  PAGODA_TRY(validate(vocab));
  if (vocab.eog.empty()) vocab.fill_eog();
  switch (vocab.kind) {
    case TokenizerKind::kSentencePiece:
      return SpmTokenizer::make(std::move(vocab));
    case TokenizerKind::kByteLevelBpe:
      return BpeTokenizer::make(std::move(vocab));
    case TokenizerKind::kWordPiece:
      return WpmTokenizer::make(std::move(vocab));
    case TokenizerKind::kUnigram:
      return UgmTokenizer::make(std::move(vocab));
  }
  return error("unknown tokenizer kind");
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_gguf(const GgufFile& file) {
  Result<Vocab> vocab = Vocab::from_gguf(file);
  if (!vocab) return vocab.status();
  Result<std::unique_ptr<Tokenizer>> tok = create(std::move(vocab).value());
  if (!tok) return error("{}: {}", file.path(), tok.status().message());
  return tok;
}

std::string Tokenizer::token_to_bytes(int32_t id, bool render_special) const {
  if (id < 0 || id >= vocab_size()) return {};
  const std::string& piece = vocab_.pieces[id];
  if (auto special = non_text_token_bytes(vocab_.type(id), piece, render_special)) return *special;
  return text_piece_bytes(piece);
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool render_special) const {
  std::string out;
  bool at_start = true;
  const bool first_token_only = strips_first_token_only();
  for (int32_t id : ids) {
    std::string piece = token_to_bytes(id, render_special);
    if (at_start && (!piece.empty() || first_token_only)) {
      if (vocab_.add_space_prefix && piece[0] == ' ') piece.erase(0, 1);
      at_start = false;
    }
    out += piece;
  }
  return out;
}

bool Tokenizer::is_eog(int32_t id) const {
  return std::find(vocab_.eog.begin(), vocab_.eog.end(), id) != vocab_.eog.end();
}

}  // namespace pagoda

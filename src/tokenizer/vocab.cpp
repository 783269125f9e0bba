#include "tokenizer/vocab.h"
#include "base/printable.h"

#include <algorithm>
#include <array>
#include <string_view>

#include "gguf/gguf_file.h"

namespace pagoda {
namespace {

// Pieces that end a turn in the chat formats we know. Matched by name because GGUF
// files carry only eos (and sometimes eot) explicitly; llama.cpp does the same.
constexpr std::array<std::string_view, 12> kEndOfTurnNames = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|eom_id|>",
    "<EOT>", "_<EOT>", "<|end_of_text|>", "<end_of_utterance>", "<|return|>", "<|call|>",
};

// The subset used to fill a missing eot: tokens that end a chat turn specifically.
constexpr std::array<std::string_view, 5> kEotNames = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<EOT>",
};

Status read_string_array(const GgufFile& f, std::string_view key, std::vector<std::string>& out,
                         bool required) {
  const GgufArray* arr = f.get_array(key);
  if (arr == nullptr) {
    if (required) return error("{}: missing metadata key {}", f.path(), key);
    return Status::ok();
  }
  out.clear();
  out.reserve(arr->values.size());
  for (size_t i = 0; i < arr->values.size(); ++i) {
    const std::string* s = arr->values[i].as_string();
    if (s == nullptr) return error("{}: {}[{}] is not a string", f.path(), key, i);
    out.push_back(*s);
  }
  return Status::ok();
}

Status read_token_id(const GgufFile& f, std::string_view key, size_t n_vocab, int32_t& out) {
  const GgufValue* v = f.find(key);
  if (v == nullptr) return Status::ok();
  const std::optional<int64_t> id = v->as_int();
  if (!id) return error("{}: {} is not an integer", f.path(), key);
  if (*id < 0 || static_cast<uint64_t>(*id) >= n_vocab) {
    return error("{}: {} = {} is outside the vocabulary (size {})", f.path(), key, *id, n_vocab);
  }
  out = static_cast<int32_t>(*id);
  return Status::ok();
}

void read_bool(const GgufFile& f, std::string_view key, bool& out) {
  if (auto b = f.get_bool(key)) out = *b;
}

// An array of UINT8 or INT8 as raw bytes (left unchanged when the key is absent).
Status read_byte_array(const GgufFile& f, std::string_view key, std::string& out) {
  const GgufValue* v = f.find(key);
  if (v == nullptr) return Status::ok();
  const GgufArray* arr = v->as_array();
  if (arr == nullptr || (arr->elem_type != GgufType::UINT8 && arr->elem_type != GgufType::INT8)) {
    return error("{}: {} is not an array of bytes", f.path(), key);
  }
  out.clear();
  out.reserve(arr->values.size());
  for (const GgufValue& b : arr->values) out.push_back(static_cast<char>(b.as_int().value_or(0)));
  return Status::ok();
}

}  // namespace

void Vocab::fill_eog() {
  auto find_named = [&](std::string_view name) -> int32_t {
    for (size_t id = 0; id < pieces.size(); ++id) {
      if (pieces[id] == name) return static_cast<int32_t>(id);
    }
    return -1;
  };
  // Only look up the named pieces among non-normal tokens: the names are angle-bracket
  // markers that a normal piece happens to spell only in a broken vocabulary.
  auto is_marker = [&](size_t id) {
    return type(static_cast<int32_t>(id)) == TokenType::kControl ||
           type(static_cast<int32_t>(id)) == TokenType::kUserDefined;
  };
  if (eot < 0) {
    for (std::string_view name : kEotNames) {
      const int32_t id = find_named(name);
      if (id >= 0 && is_marker(static_cast<size_t>(id))) {
        eot = id;
        break;
      }
    }
  }
  eog.clear();
  if (eos >= 0) eog.push_back(eos);
  if (eot >= 0) eog.push_back(eot);
  for (size_t id = 0; id < pieces.size(); ++id) {
    if (!is_marker(id)) continue;
    if (std::find(kEndOfTurnNames.begin(), kEndOfTurnNames.end(), pieces[id]) !=
        kEndOfTurnNames.end()) {
      eog.push_back(static_cast<int32_t>(id));
    }
  }
  std::sort(eog.begin(), eog.end());
  eog.erase(std::unique(eog.begin(), eog.end()), eog.end());
}

const char* tokenizer_kind_name(TokenizerKind k) {
  switch (k) {
    case TokenizerKind::kSentencePiece: return "llama";
    case TokenizerKind::kByteLevelBpe: return "gpt2";
    case TokenizerKind::kWordPiece: return "bert";
    case TokenizerKind::kUnigram: return "t5";
  }
  return "?";
}

Result<Vocab> Vocab::from_gguf(const GgufFile& f) {
  Vocab v;
  const std::optional<std::string> model = f.get_string("tokenizer.ggml.model");
  if (!model) return error("{}: missing metadata key tokenizer.ggml.model", f.path());
  if (*model == "llama") {
    v.kind = TokenizerKind::kSentencePiece;
  } else if (*model == "gpt2") {
    v.kind = TokenizerKind::kByteLevelBpe;
  } else if (*model == "gemma4") {
    // Byte-level BPE's machinery over raw UTF-8; the pre-tokenizer name says so.
    v.kind = TokenizerKind::kByteLevelBpe;
  } else if (*model == "bert") {
    v.kind = TokenizerKind::kWordPiece;
  } else if (*model == "t5") {
    v.kind = TokenizerKind::kUnigram;
  } else {
    return error("{}: tokenizer.ggml.model = {} is not supported (only 'llama', 'gpt2', 'gemma4', 'bert' and 't5')",
                 f.path(), in_quotes(*model));
  }
  v.pre = f.get_string("tokenizer.ggml.pre").value_or(*model == "gemma4" ? "gemma4" : "");

  PAGODA_TRY(read_string_array(f, "tokenizer.ggml.tokens", v.pieces, /*required=*/true));
  const size_t n = v.pieces.size();
  if (n == 0) return error("{}: tokenizer.ggml.tokens is empty", f.path());

  if (const GgufArray* scores = f.get_array("tokenizer.ggml.scores")) {
    if (scores->values.size() != n) {
      return error("{}: tokenizer.ggml.scores has {} entries for {} tokens", f.path(),
                   scores->values.size(), n);
    }
    v.scores.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      const std::optional<double> s = scores->values[i].as_float();
      if (!s) return error("{}: tokenizer.ggml.scores[{}] is not a number", f.path(), i);
      v.scores.push_back(static_cast<float>(*s));
    }
  }
  if (const GgufArray* types = f.get_array("tokenizer.ggml.token_type")) {
    if (types->values.size() != n) {
      return error("{}: tokenizer.ggml.token_type has {} entries for {} tokens", f.path(),
                   types->values.size(), n);
    }
    v.types.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      const std::optional<int64_t> t = types->values[i].as_int();
      if (!t || *t < 0 || *t > static_cast<int64_t>(TokenType::kByte)) {
        return error("{}: tokenizer.ggml.token_type[{}] is not a known token type", f.path(), i);
      }
      v.types.push_back(static_cast<TokenType>(*t));
    }
  }
  PAGODA_TRY(read_string_array(f, "tokenizer.ggml.merges", v.merges, /*required=*/false));
  if (v.kind == TokenizerKind::kByteLevelBpe && v.merges.empty()) {
    return error("{}: byte-level BPE vocabulary without tokenizer.ggml.merges", f.path());
  }

  if (v.kind == TokenizerKind::kSentencePiece) {
    // SentencePiece's fixed ids, used by files that leave the keys out (as llama.cpp does).
    v.unk = 0;
    v.bos = n > 1 ? 1 : -1;
    v.eos = n > 2 ? 2 : -1;
    v.add_bos = true;
    v.add_space_prefix = true;
  } else {
    v.add_space_prefix = false;
  }
  if (v.kind == TokenizerKind::kWordPiece) {
    // BERT frames a text as [CLS] ... [SEP]: the converter writes those ids under their
    // own keys ("seperator" is the key's spelling).
    PAGODA_TRY(read_token_id(f, "tokenizer.ggml.cls_token_id", n, v.bos));
    PAGODA_TRY(read_token_id(f, "tokenizer.ggml.seperator_token_id", n, v.eos));
    v.add_bos = v.add_eos = true;
    v.add_space_prefix = true;  // the "▁" of a text's first word is not a space in the text
    read_bool(f, "tokenizer.ggml.normalizer.lowercase", v.lowercase);
    v.strip_accents = v.lowercase;  // Hugging Face's default follows lowercase
    read_bool(f, "tokenizer.ggml.normalizer.strip_accents", v.strip_accents);
  }
  if (v.kind == TokenizerKind::kUnigram) {
    // llama.cpp's defaults for T5-style files: <pad> 0, </s> 1, <unk> 2, no BOS, EOS
    // added; no space prefix unless the file asks (the converter always writes the key).
    v.pad = 0;
    v.eos = n > 1 ? 1 : -1;
    v.unk = n > 2 ? 2 : -1;
    v.add_bos = false;
    v.add_eos = true;
    v.add_space_prefix = false;
    read_bool(f, "tokenizer.ggml.remove_extra_whitespaces", v.remove_extra_whitespaces);
    PAGODA_TRY(read_byte_array(f, "tokenizer.ggml.precompiled_charsmap", v.precompiled_charsmap));
  }
  PAGODA_TRY(read_token_id(f, "tokenizer.ggml.bos_token_id", n, v.bos));
  PAGODA_TRY(read_token_id(f, "tokenizer.ggml.eos_token_id", n, v.eos));
  PAGODA_TRY(read_token_id(f, "tokenizer.ggml.unknown_token_id", n, v.unk));
  PAGODA_TRY(read_token_id(f, "tokenizer.ggml.padding_token_id", n, v.pad));
  PAGODA_TRY(read_token_id(f, "tokenizer.ggml.eot_token_id", n, v.eot));
  // Only text pairs read it, so a bad value leaves it unset rather than refusing the file.
  if (!read_token_id(f, "tokenizer.ggml.seperator_token_id", n, v.sep).is_ok()) v.sep = -1;
  read_bool(f, "tokenizer.ggml.add_bos_token", v.add_bos);
  read_bool(f, "tokenizer.ggml.add_eos_token", v.add_eos);
  read_bool(f, "tokenizer.ggml.add_sep_token", v.add_sep);
  read_bool(f, "tokenizer.ggml.add_space_prefix", v.add_space_prefix);
  v.fill_eog();
  return v;
}

std::vector<int32_t> frequent_tokens(const Vocab& v, int32_t k) {
  std::vector<int32_t> ids;
  const int32_t n = static_cast<int32_t>(v.pieces.size());
  ids.reserve(static_cast<size_t>(n));
  for (int32_t id = 0; id < n; ++id) {
    const TokenType t = v.type(id);
    const bool eog = std::find(v.eog.begin(), v.eog.end(), id) != v.eog.end();
    if ((t == TokenType::kControl || t == TokenType::kUnused || t == TokenType::kUnknown) && !eog) continue;
    ids.push_back(id);
  }
  if (v.scores.size() == v.pieces.size())
    std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
      return v.scores[static_cast<size_t>(a)] > v.scores[static_cast<size_t>(b)];
    });
  if (k >= 0 && static_cast<size_t>(k) < ids.size()) ids.resize(static_cast<size_t>(k));
  return ids;
}

}  // namespace pagoda

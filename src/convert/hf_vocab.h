// A Hugging Face tokenizer (tokenizer.json, tokenizer_config.json, config.json's token
// ids) as the GGUF vocabulary keys llama.cpp's converter writes: the token list with
// llama.cpp's token types, the merges, tokenizer.ggml.pre, the special token ids and
// add_* flags as gguf-py's SpecialVocab derives them, the normalizer flags and the chat
// template. Three kinds are read: WordPiece (BERT; pieces rewritten to llama.cpp's
// "phantom space" form), SentencePiece (tokenizer.model, as llama.cpp's converter reads
// it first for the decoder families) and byte-level BPE (GPT-2, Llama 3, Qwen2
// pre-tokenizers, told apart by the pre_tokenizer of tokenizer.json); anything else is
// refused with a message saying what was found. Reading costs one parse of tokenizer.json (a few MB); the result
// is a plain value.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace pagoda {

class GgufWriter;
class HfConfig;

// llama.cpp's token types (gguf-py TokenType).
enum HfTokenType : int32_t {
  kTokNormal = 1,
  kTokUnknown = 2,
  kTokControl = 3,
  kTokUserDefined = 4,
  kTokUnused = 5,
  kTokByte = 6,
};

enum class HfVocabKind {
  kWordPiece,
  // tokenizer.model when it is a SentencePiece model, else tokenizer.json's byte-level BPE.
  kSentencePieceOrBpe,
};

struct HfVocab {
  std::string model;  // tokenizer.ggml.model: "bert", "llama" (SentencePiece) or "gpt2"
  std::string pre;    // tokenizer.ggml.pre
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  std::vector<float> scores;  // SentencePiece only
  size_t hf_token_count = 0;        // entries of model.vocab plus added_tokens (before padding)
  std::vector<std::string> merges;  // "a b", spaces inside a part written as U+0120
  // (GGUF key, id) in the order SpecialVocab sets them: "bos_token_id", "seperator_token_id" ...
  std::vector<std::pair<std::string, uint32_t>> special_ids;
  // (GGUF key, value): "add_bos_token", "add_eos_token", "add_sep_token".
  std::vector<std::pair<std::string, bool>> add_flags;
  std::optional<bool> lowercase, strip_accents;
  std::optional<std::string> chat_template;
  std::optional<uint32_t> token_type_count;  // BERT's type_vocab_size
  std::optional<bool> add_space_prefix;      // tokenizer.ggml.add_space_prefix
  std::vector<std::string> notes;            // for the user: what was chosen and why
};

// llama.cpp's phantom-space form of a WordPiece piece: control tokens stay as they are,
// "##x" continuations become "x", word-initial pieces get a leading U+2581.
std::string phantom_piece(std::string_view piece, int32_t type);

// tokenizer.ggml.pre for a byte-level BPE pre_tokenizer of tokenizer.json, or an error
// that names what was found and what is recognised.
Result<std::string> detect_bpe_pre(const nlohmann::json& pre_tokenizer);

// The vocabulary of the model folder `dir`. config's vocab_size (when present) is the
// token count, gaps filled with "[PAD<i>]" unused tokens as llama.cpp does.
Result<HfVocab> read_hf_vocab(const std::string& dir, const HfConfig& config, HfVocabKind kind);

// The tokenizer.* keys.
void write_vocab(const HfVocab& v, GgufWriter& w);

}  // namespace pagoda

// A text pair as a cross-encoder reads it: [BOS] first [EOS] ([SEP]) second [EOS], each
// special token only where the vocabulary's add_* keys say, as llama.cpp's rerank prompt
// frames it; for BERT that is Hugging Face's "[CLS] A [SEP] B [SEP]". The second text's
// tokens and its closing EOS are token type 1 (Hugging Face's pair template: "$B:1
// [SEP]:1"). A pure function of the tokenizer and the texts; O(length of the texts).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace pagoda {

struct TextPair {
  std::vector<int32_t> ids;
  int32_t second = 0;  // index in ids of the second text's first token (where type 1 starts)
};

// Special tokens written in the texts (such as "[SEP]") become their tokens, as Hugging
// Face's tokenizers read them.
TextPair encode_text_pair(const Tokenizer& tok, std::string_view first, std::string_view second);

}  // namespace pagoda

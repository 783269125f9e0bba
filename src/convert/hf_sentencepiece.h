// The pieces of a SentencePiece model file (tokenizer.model, a serialized ModelProto),
// read without the protobuf library: only field 1 (the repeated SentencePiece messages:
// piece text, score, type) is decoded, everything else is skipped by wire type. Every
// length and varint is bounds-checked, so a damaged or non-SentencePiece file (Llama 3
// ships a tiktoken file under that name) is an error, never a crash. O(file size); pure.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace pagoda {

struct SpmPiece {
  std::string piece;
  float score = 0.0f;
  int32_t type = 1;  // sentencepiece's Type: 1 normal, 2 unknown, 3 control, 4 user defined, 5 unused, 6 byte
};

Result<std::vector<SpmPiece>> parse_sentencepiece_model(const uint8_t* data, size_t size, const std::string& path);

}  // namespace pagoda

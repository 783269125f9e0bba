#include "convert/hf_sentencepiece.h"

#include <cstring>

namespace pagoda {
namespace {

// A bounded reader of protobuf's wire format.
class Wire {
 public:
  Wire(const uint8_t* p, size_t n) : p_(p), end_(p + n) {}
  bool done() const { return p_ == end_; }
  bool varint(uint64_t& v) {
    v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_ == end_) return false;
      const uint8_t b = *p_++;
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) return true;
    }
    return false;  // more than 10 bytes
  }
  bool bytes(size_t n, const uint8_t*& out) {
    if (static_cast<size_t>(end_ - p_) < n) return false;
    out = p_;
    p_ += n;
    return true;
  }
  // Skips one field of the given wire type; false when the type is unknown or the data ends.
  bool skip(uint32_t wire) {
    uint64_t v = 0;
    const uint8_t* unused = nullptr;
    switch (wire) {
      case 0: return varint(v);
      case 1: return bytes(8, unused);
      case 2: return varint(v) && v <= SIZE_MAX && bytes(static_cast<size_t>(v), unused);
      case 5: return bytes(4, unused);
      default: return false;
    }
  }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
};

bool parse_piece(const uint8_t* p, size_t n, SpmPiece& out) {
  Wire w(p, n);
  while (!w.done()) {
    uint64_t key = 0;
    if (!w.varint(key)) return false;
    const uint64_t field = key >> 3;
    const uint32_t wire = static_cast<uint32_t>(key & 7);
    if (field == 1 && wire == 2) {
      uint64_t len = 0;
      const uint8_t* s = nullptr;
      if (!w.varint(len) || len > SIZE_MAX || !w.bytes(static_cast<size_t>(len), s)) return false;
      out.piece.assign(reinterpret_cast<const char*>(s), static_cast<size_t>(len));
    } else if (field == 2 && wire == 5) {
      const uint8_t* s = nullptr;
      if (!w.bytes(4, s)) return false;
      std::memcpy(&out.score, s, 4);  // little-endian, as x86 stores it
    } else if (field == 3 && wire == 0) {
      uint64_t t = 0;
      if (!w.varint(t) || t < 1 || t > 6) return false;
      out.type = static_cast<int32_t>(t);
    } else if (!w.skip(wire)) {
      return false;
    }
  }
  return true;
}

}  // namespace

Result<std::vector<SpmPiece>> parse_sentencepiece_model(const uint8_t* data, size_t size, const std::string& path) {
  Wire w(data, size);
  std::vector<SpmPiece> pieces;
  while (!w.done()) {
    uint64_t key = 0;
    if (!w.varint(key)) return error("{}: not a SentencePiece model (bad field key at piece {})", path, pieces.size());
    const uint64_t field = key >> 3;
    const uint32_t wire = static_cast<uint32_t>(key & 7);
    if (field == 1 && wire == 2) {
      uint64_t len = 0;
      const uint8_t* msg = nullptr;
      if (!w.varint(len) || len > SIZE_MAX || !w.bytes(static_cast<size_t>(len), msg))
        return error("{}: not a SentencePiece model (piece {} runs past the end)", path, pieces.size());
      SpmPiece p;
      if (!parse_piece(msg, static_cast<size_t>(len), p))
        return error("{}: not a SentencePiece model (piece {} is malformed)", path, pieces.size());
      pieces.push_back(std::move(p));
    } else if (!w.skip(wire)) {
      return error("{}: not a SentencePiece model (field {} with wire type {})", path, field, wire);
    }
  }
  if (pieces.empty()) return error("{}: not a SentencePiece model (no pieces)", path);
  return pieces;
}

}  // namespace pagoda

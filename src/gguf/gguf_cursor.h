// Bounds-checked little-endian reading over a GGUF file's bytes, internal to the gguf
// module. Every read either succeeds and advances, or fails and leaves the position
// unchanged, so the caller can name the field and the offset in its error. The reads
// return bool rather than Status because they run once per vocabulary entry: an error
// message is built only on the failure path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace pagoda::gguf_detail {

class Cursor {
 public:
  Cursor(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  size_t pos() const { return pos_; }
  size_t size() const { return size_; }
  size_t remaining() const { return size_ - pos_; }

  template <typename T>
  bool read(T& out) {
    if (remaining() < sizeof(T)) return false;
    // memcpy, not a cast: fields in GGUF have no alignment guarantee.
    std::memcpy(&out, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }

  // A GGUF string: u64 byte length, then the bytes (no terminator).
  bool read_string(std::string& out) {
    uint64_t len = 0;
    if (remaining() < sizeof(len)) return false;
    std::memcpy(&len, data_ + pos_, sizeof(len));
    if (len > remaining() - sizeof(len)) return false;
    out.assign(reinterpret_cast<const char*>(data_ + pos_ + sizeof(len)), len);
    pos_ += sizeof(len) + len;
    return true;
  }

  // The u64 at the current position without consuming it, for error messages about a
  // length that ran past the end; 0 when even that is cut off.
  uint64_t peek_u64() const {
    uint64_t v = 0;
    if (remaining() >= sizeof(v)) std::memcpy(&v, data_ + pos_, sizeof(v));
    return v;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

}  // namespace pagoda::gguf_detail

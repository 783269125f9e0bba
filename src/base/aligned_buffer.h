// An owned, 64-byte aligned byte buffer for data built at load time (repacked weights).
// Buffers of 2 MiB and more are aligned to 2 MiB and advised for transparent huge pages,
// so a long stream over them walks fewer page-table entries. Move-only.
#pragma once

#include <cstddef>
#include <cstdint>

namespace pagoda {

class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  // Null data() when the memory cannot be had.
  explicit AlignedBuffer(size_t n);
  ~AlignedBuffer();
  AlignedBuffer(AlignedBuffer&& o) noexcept : p_(o.p_), n_(o.n_) { o.p_ = nullptr, o.n_ = 0; }
  AlignedBuffer& operator=(AlignedBuffer&& o) noexcept;
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;

  uint8_t* data() const { return p_; }
  size_t size() const { return n_; }

 private:
  uint8_t* p_ = nullptr;
  size_t n_ = 0;
};

}  // namespace pagoda

// Per-thread scratch of the tile (GEMM) bodies: an array of aligned blocks that grows on
// demand and is kept, so the per-token path allocates only when a call is larger than
// any before it on that thread.
#pragma once

#include <cstddef>

namespace pagoda {

template <typename Block>
class TileBuffer {
 public:
  TileBuffer() = default;
  TileBuffer(const TileBuffer&) = delete;
  TileBuffer& operator=(const TileBuffer&) = delete;
  ~TileBuffer() { delete[] p_; }
  // At least n blocks; earlier contents are not kept when it grows.
  Block* get(size_t n) {
    if (n > cap_) {
      delete[] p_;
      p_ = new Block[n];
      cap_ = n;
    }
    return p_;
  }

 private:
  Block* p_ = nullptr;
  size_t cap_ = 0;
};

}  // namespace pagoda

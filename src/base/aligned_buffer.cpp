#include "base/aligned_buffer.h"

#include <cstdlib>
#include <utility>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace pagoda {

namespace {
constexpr size_t kHugePage = size_t{2} << 20;
}

AlignedBuffer::AlignedBuffer(size_t n) {
  const size_t align = n >= kHugePage ? kHugePage : 64;
  const size_t size = (n + align - 1) / align * align;
  p_ = static_cast<uint8_t*>(std::aligned_alloc(align, size == 0 ? align : size));
  if (p_ == nullptr) return;
  n_ = n;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  // Advice only: where transparent huge pages are off this changes nothing.
  if (align == kHugePage) (void)madvise(p_, size, MADV_HUGEPAGE);
#endif
}

AlignedBuffer::~AlignedBuffer() { std::free(p_); }

AlignedBuffer& AlignedBuffer::operator=(AlignedBuffer&& o) noexcept {
  if (this != &o) {
    std::free(p_);
    p_ = std::exchange(o.p_, nullptr);
    n_ = std::exchange(o.n_, 0);
  }
  return *this;
}

}  // namespace pagoda

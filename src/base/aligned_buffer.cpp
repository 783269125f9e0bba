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
  void* p = nullptr;
  if (posix_memalign(&p, align, n == 0 ? 1 : n) != 0) return;
  p_ = static_cast<uint8_t*>(p);
  n_ = n;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  // Advice only, and only for whole huge pages: a huge page under the partial tail would
  // make the buffer up to 2 MiB larger in memory than asked.
  if (align == kHugePage) (void)madvise(p_, n & ~(kHugePage - 1), MADV_HUGEPAGE);
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

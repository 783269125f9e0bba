// A read-only memory-mapped file. Model weights are used in place from the mapping
// (zero copy); the mapping lives as long as this object. Move-only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/status.h"

namespace pagoda {

class MappedFile {
 public:
  MappedFile() = default;
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  // Fails with a message naming the path if it cannot be opened or mapped.
  static Result<MappedFile> open(const std::string& path);

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

  // Tells the kernel this process is done with bytes [offset, offset + n) for now: their
  // pages leave its resident set (they stay in the page cache, and reading them again
  // faults them back in). A single pass over a large file keeps its memory near one piece.
  void drop_pages(size_t offset, size_t n) const;

  // drop_pages by address: [p, p + n) must lie in a read-only file mapping (this class's
  // data()); on anonymous memory it would zero the pages. Safe against concurrent readers
  // of the same pages: they fault them back in.
  static void drop_range(const uint8_t* p, size_t n);

 private:
  void release();
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

}  // namespace pagoda

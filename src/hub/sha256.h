// SHA-256 of byte streams and files, for checking downloaded models against their
// catalog entry. A thin layer over OpenSSL's EVP digests (hardware SHA extensions where
// the CPU has them: about 1.5-2 GB/s, so hashing a 1 GB model costs under a second).
// A Sha256 object is used by one thread at a time.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "base/status.h"

namespace pagoda {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(Sha256&&) noexcept;
  Sha256& operator=(Sha256&&) noexcept;
  void update(const void* data, size_t size);
  // Lower-case hex of the digest; the object must not be updated afterwards.
  std::string hex_digest();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

Result<std::string> sha256_file(const std::string& path);

}  // namespace pagoda

// GGUF v3 writer. Metadata and tensor descriptions are collected first; tensor bytes are
// produced one tensor at a time by a callback while writing, so a multi-gigabyte model
// never has to sit in memory whole. Output is readable by llama.cpp and the `gguf`
// Python package.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "gguf/gguf_file.h"
#include "tensor/dtype.h"

namespace pagoda {

class GgufWriter {
 public:
  explicit GgufWriter(uint64_t alignment = 32) : alignment_(alignment) {}

  void set(const std::string& key, GgufValue value);  // replaces an existing key
  void set_u32(const std::string& key, uint32_t v);
  void set_i32(const std::string& key, int32_t v);
  void set_f32(const std::string& key, float v);
  void set_bool(const std::string& key, bool v);
  void set_string(const std::string& key, const std::string& v);
  void set_string_array(const std::string& key, const std::vector<std::string>& v);
  void set_f32_array(const std::string& key, const std::vector<float>& v);
  void set_i32_array(const std::string& key, const std::vector<int32_t>& v);

  // fill(dst) must write exactly row_bytes(type, shape[0]) * rows bytes into dst.
  using Fill = std::function<void(uint8_t* dst)>;
  void add_tensor(const std::string& name, std::vector<int64_t> shape, DType type, Fill fill);
  // Convenience: copies `bytes` now.
  void add_tensor_bytes(const std::string& name, std::vector<int64_t> shape, DType type,
                        const void* bytes, size_t nbytes);

  // Checks everything (value types and ranges, tensor names, shapes, block sizes, the
  // alignment) before creating anything, then writes to a temporary name beside `path`
  // and renames it over `path` at the end, so a failed write leaves no file behind and
  // never half-replaces an existing one. general.alignment is written as this writer's
  // alignment (added when it is not the default 32, or when the caller set the key).
  Status write(const std::string& path) const;

 private:
  struct Pending {
    std::string name;
    std::vector<int64_t> shape;
    DType type;
    Fill fill;
    std::optional<size_t> given_nbytes;  // add_tensor_bytes: checked against the shape
  };
  Status check_tensor(const Pending& t) const;
  Status encode_header(std::string& out, std::vector<uint64_t>& offsets) const;
  uint64_t alignment_;
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::vector<Pending> tensors_;
};

}  // namespace pagoda

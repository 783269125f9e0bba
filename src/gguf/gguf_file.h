// GGUF v2/v3 reader. The file is memory-mapped; tensor data is used in place. Every
// offset, size, type and count is validated before use, and anything malformed or
// unsupported is an error naming the file and the field (truncated file, bad magic,
// unknown tensor or value type, tensor past the end of the file, overflowing dimensions,
// misaligned data). After open() succeeds every accessor is safe. Opening costs one pass
// over the metadata (tens of milliseconds for a 262k-token vocabulary) and nothing per
// tensor byte, except in a file whose general.alignment leaves a tensor below its block's
// alignment (alignment 1 or 2): such a tensor is copied once into aligned memory, since
// the kernels read block scales in place. Corrupt counts fail fast: they are checked against the bytes left before
// anything is allocated, and a file may hold at most 2^24 metadata values, 2^20 tensors
// and arrays nested 16 deep.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/aligned_buffer.h"
#include "base/mapped_file.h"
#include "base/status.h"
#include "tensor/dtype.h"

namespace pagoda {

namespace gguf_detail {
class Cursor;
}

// GGUF metadata value types, numbered as in the file.
enum class GgufType : uint32_t {
  UINT8 = 0, INT8 = 1, UINT16 = 2, INT16 = 3, UINT32 = 4, INT32 = 5, FLOAT32 = 6,
  BOOL = 7, STRING = 8, ARRAY = 9, UINT64 = 10, INT64 = 11, FLOAT64 = 12,
};

// The type for an id read from a file, or nullopt for an id the format does not define.
std::optional<GgufType> gguf_type_from_id(uint32_t id);
std::string_view gguf_type_name(GgufType t);  // "UINT8", ..., "ARRAY"

struct GgufArray;
// One metadata value. Integers of every width are stored widened, with `type` keeping
// the on-disk type so a writer can round-trip it.
struct GgufValue {
  GgufType type = GgufType::UINT32;
  std::variant<uint64_t, int64_t, double, bool, std::string, std::shared_ptr<GgufArray>> v;

  std::optional<int64_t> as_int() const;     // any integer type (and bool) that fits
  std::optional<double> as_float() const;    // any numeric type
  const std::string* as_string() const;
  const GgufArray* as_array() const;
};

struct GgufArray {
  GgufType elem_type = GgufType::UINT8;
  std::vector<GgufValue> values;
};

struct GgufTensor {
  std::string name;
  std::vector<int64_t> shape;  // ne[0] first: ne[0] is the contiguous (row) dimension
  DType type = DType::F32;
  uint64_t offset = 0;         // relative to the data section
  const uint8_t* data = nullptr;
  size_t nbytes = 0;
  bool realigned = false;      // data is an aligned copy, not the mapping (see above)
  int64_t num_elements() const;
};

class GgufFile {
 public:
  static Result<GgufFile> open(const std::string& path);

  const std::string& path() const { return file_.path(); }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  size_t data_offset() const { return data_offset_; }
  size_t file_size() const { return file_.size(); }

  // Metadata in file order.
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return kv_; }
  const GgufValue* find(std::string_view key) const;
  std::optional<int64_t> get_int(std::string_view key) const;
  std::optional<double> get_float(std::string_view key) const;
  std::optional<std::string> get_string(std::string_view key) const;
  std::optional<bool> get_bool(std::string_view key) const;
  const GgufArray* get_array(std::string_view key) const;

  const std::vector<GgufTensor>& tensors() const { return tensors_; }
  const GgufTensor* find_tensor(std::string_view name) const;

  // Releases the resident pages of a tensor read once (see MappedFile::drop_pages); its
  // data stays readable.
  void drop_pages(const GgufTensor& t) const { file_.drop_pages(static_cast<size_t>(t.data - file_.data()), t.nbytes); }
  // Releases every resident page of the file (metadata and tensors): done once what a
  // process reads only at load (metadata, packed matrices, vectors copied out) is read;
  // what it still reads faults back in.
  void drop_all_pages() const { file_.drop_pages(0, file_.size()); }
  // Whether p points into this file's mapping (where MappedFile::drop_range may be used).
  bool maps(const uint8_t* p) const { return p >= file_.data() && p < file_.data() + file_.size(); }

 private:
  // The steps of open(), in file order; each names the file and field in its errors.
  Status parse();
  Status parse_metadata(gguf_detail::Cursor& c, uint64_t count);
  Status parse_tensor_infos(gguf_detail::Cursor& c, uint64_t count);
  Status place_tensors(size_t infos_end);

  MappedFile file_;
  std::vector<AlignedBuffer> realigned_;  // copies of tensors the mapping holds misaligned
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  size_t data_offset_ = 0;
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::map<std::string, size_t, std::less<>> kv_index_;
  std::vector<GgufTensor> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

}  // namespace pagoda

// Reading Hugging Face *.safetensors weights in place. A file is an 8-byte little-endian
// header length, a JSON header ({"name": {"dtype", "shape", "data_offsets": [begin, end]},
// optionally "__metadata__"}) and the raw tensor bytes; a sharded model lists its shards
// in model.safetensors.index.json. Every file is memory-mapped; the header is parsed and
// every field checked (JSON, dtype, shape, offsets inside the data section, size equal to
// the shape's bytes, no overlaps, no duplicate names across shards) before any tensor is
// handed out, so a malformed file is an error naming the file and tensor, never a crash.
// Every dtype of the format is parsed (so a file with an I64 buffer such as BERT's
// position_ids opens), but only F32, F16 and BF16 tensors can be read as weights
// (`readable()`); an unknown dtype name is an error. Opening costs one pass over the headers and nothing per tensor
// byte. After open, the set is read-only and may be read from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/mapped_file.h"
#include "base/status.h"
#include "tensor/dtype.h"

namespace pagoda {

struct SafetensorsTensor {
  std::string name;
  std::string dtype;           // as the header spells it: "F32", "BF16", "I64", ...
  DType type = DType::F32;     // F32, F16 or BF16 when readable()
  bool readable = false;       // a float format the converter decodes
  std::vector<int64_t> shape;  // as PyTorch orders it: shape[0] is the outermost dimension
  const uint8_t* data = nullptr;
  size_t nbytes = 0;
  size_t file = 0;  // index of the shard that holds it (SafetensorsSet::files)

  int64_t num_elements() const;
  // Rows in GGUF's sense: everything but the innermost dimension (1 for a vector).
  int64_t rows() const;
  int64_t cols() const { return shape.empty() ? 1 : shape.back(); }
};

// Parses and checks one file's bytes; the tensors point into `bytes`. `path` names the
// file in errors. Tensors come back in the order of their data (ascending offsets).
Result<std::vector<SafetensorsTensor>> parse_safetensors(const uint8_t* bytes, size_t size, const std::string& path);

class SafetensorsSet {
 public:
  // The weights of a model folder: the shards model.safetensors.index.json names, or else
  // every *.safetensors file directly in `dir` (sorted by name). Fails when there is none.
  static Result<SafetensorsSet> open_dir(const std::string& dir);
  // Exactly these files, in this order.
  static Result<SafetensorsSet> open_files(const std::vector<std::string>& paths);

  // File order, then data order within each file.
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  const SafetensorsTensor* find(std::string_view name) const;
  const std::vector<MappedFile>& files() const { return files_; }
  // Releases the resident pages of a tensor read once (MappedFile::drop_pages).
  void drop_pages(const SafetensorsTensor& t) const;

 private:
  std::vector<MappedFile> files_;
  std::vector<SafetensorsTensor> tensors_;
};

}  // namespace pagoda

// Element and block formats of tensors, numbered as GGUF numbers them so a tensor's type
// id can be used directly. A block format packs `block_size` values into `type_size`
// bytes; a row of n values (n a multiple of block_size) takes n / block_size * type_size
// bytes. Pure data: the arithmetic of each format lives in src/quant/.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace pagoda {

// Every type of tensor/formats.inc, numbered by its GGUF id.
enum class DType : uint32_t {
#define PAGODA_FORMAT(NAME, ID, ...) NAME = ID,
#define PAGODA_STORAGE_TYPE(NAME, ID, ...) NAME = ID,
#include "tensor/formats.inc"
};

struct DTypeInfo {
  DType type;
  std::string_view name;
  int64_t block_size;  // values per block (1 for plain element types)
  int64_t type_size;   // bytes per block
  bool quantized;
  int32_t file_type;   // llama.cpp's general.file_type of a file mostly of this type; -1: none
};

// Info for a known type id, or nullopt for an id Pagoda does not know (callers turn that
// into an error naming the file and tensor).
std::optional<DTypeInfo> dtype_info(uint32_t id);
const DTypeInfo& dtype_info(DType t);
std::string_view dtype_name(DType t);
std::optional<DType> dtype_from_name(std::string_view name);

// Bytes of one row of n values; n must be a multiple of the block size.
inline size_t row_bytes(const DTypeInfo& info, int64_t n) {
  return static_cast<size_t>(n / info.block_size * info.type_size);
}
size_t row_bytes(DType t, int64_t n);

// The address alignment a tensor of this type needs: the largest power of two up to 8
// that divides the block size in bytes. Never below alignof() of the block struct
// (quant/blocks.h: FP16 scales give 2, Q8_K's F32 scale 4), and met by every file whose
// general.alignment is at least 8 (llama.cpp writes 32).
inline size_t block_alignment(const DTypeInfo& info) {
  const auto bytes = static_cast<size_t>(info.type_size);
  size_t a = 1;
  while (a < 8 && bytes % (a * 2) == 0) a *= 2;
  return a;
}

}  // namespace pagoda

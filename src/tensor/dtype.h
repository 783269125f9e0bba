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

enum class DType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  BF16 = 30,
};

struct DTypeInfo {
  DType type;
  std::string_view name;
  int64_t block_size;  // values per block (1 for plain element types)
  int64_t type_size;   // bytes per block
  bool quantized;
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

}  // namespace pagoda

#include "tensor/dtype.h"

#include <array>

namespace pagoda {
namespace {

constexpr std::array kTypes = {
#define PAGODA_FORMAT(NAME, ID, BLOCK, BYTES, FILE_TYPE, ...) \
  DTypeInfo{DType::NAME, #NAME, BLOCK, BYTES, (BLOCK) > 1, FILE_TYPE},
#define PAGODA_STORAGE_TYPE(NAME, ID, BLOCK, BYTES) DTypeInfo{DType::NAME, #NAME, BLOCK, BYTES, (BLOCK) > 1, -1},
#include "tensor/formats.inc"
};

}  // namespace

std::optional<DTypeInfo> dtype_info(uint32_t id) {
  for (const auto& t : kTypes)
    if (static_cast<uint32_t>(t.type) == id) return t;
  return std::nullopt;
}

const DTypeInfo& dtype_info(DType t) {
  for (const auto& i : kTypes)
    if (i.type == t) return i;
  return kTypes[0];  // unreachable for enum values
}

std::string_view dtype_name(DType t) { return dtype_info(t).name; }

std::optional<DType> dtype_from_name(std::string_view name) {
  for (const auto& t : kTypes)
    if (t.name == name) return t.type;
  return std::nullopt;
}

size_t row_bytes(DType t, int64_t n) { return row_bytes(dtype_info(t), n); }

}  // namespace pagoda

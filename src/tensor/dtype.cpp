#include "tensor/dtype.h"

#include <array>

namespace pagoda {
namespace {

constexpr int64_t QK_K = 256;

constexpr std::array kTypes = {
    DTypeInfo{DType::F32, "F32", 1, 4, false},
    DTypeInfo{DType::F16, "F16", 1, 2, false},
    DTypeInfo{DType::Q4_0, "Q4_0", 32, 2 + 16, true},
    DTypeInfo{DType::Q4_1, "Q4_1", 32, 2 + 2 + 16, true},
    DTypeInfo{DType::Q5_0, "Q5_0", 32, 2 + 4 + 16, true},
    DTypeInfo{DType::Q5_1, "Q5_1", 32, 2 + 2 + 4 + 16, true},
    DTypeInfo{DType::Q8_0, "Q8_0", 32, 2 + 32, true},
    DTypeInfo{DType::Q8_1, "Q8_1", 32, 4 + 32, true},
    DTypeInfo{DType::Q2_K, "Q2_K", QK_K, 2 + 2 + QK_K / 16 + QK_K / 4, true},
    DTypeInfo{DType::Q3_K, "Q3_K", QK_K, 2 + QK_K / 4 + QK_K / 8 + 12, true},
    DTypeInfo{DType::Q4_K, "Q4_K", QK_K, 2 + 2 + 12 + QK_K / 2, true},
    DTypeInfo{DType::Q5_K, "Q5_K", QK_K, 2 + 2 + 12 + QK_K / 8 + QK_K / 2, true},
    DTypeInfo{DType::Q6_K, "Q6_K", QK_K, 2 + QK_K / 16 + 3 * QK_K / 4, true},
    DTypeInfo{DType::Q8_K, "Q8_K", QK_K, 4 + QK_K + QK_K / 16 * 2, true},
    DTypeInfo{DType::I8, "I8", 1, 1, false},
    DTypeInfo{DType::I16, "I16", 1, 2, false},
    DTypeInfo{DType::I32, "I32", 1, 4, false},
    DTypeInfo{DType::I64, "I64", 1, 8, false},
    DTypeInfo{DType::F64, "F64", 1, 8, false},
    DTypeInfo{DType::BF16, "BF16", 1, 2, false},
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

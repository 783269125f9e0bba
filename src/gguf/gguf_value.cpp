#include <array>
#include <cstdint>
#include <limits>

#include "gguf/gguf_file.h"
#include "gguf/gguf_value_io.h"

namespace pagoda {
namespace {

constexpr std::array<std::string_view, 13> kTypeNames = {
    "UINT8", "INT8",   "UINT16", "INT16",  "UINT32", "INT32",   "FLOAT32",
    "BOOL",  "STRING", "ARRAY",  "UINT64", "INT64",  "FLOAT64",
};

}  // namespace

std::optional<GgufType> gguf_type_from_id(uint32_t id) {
  if (id >= kTypeNames.size()) return std::nullopt;
  return static_cast<GgufType>(id);
}

std::string_view gguf_type_name(GgufType t) {
  auto id = static_cast<uint32_t>(t);
  return id < kTypeNames.size() ? kTypeNames[id] : std::string_view("UNKNOWN");
}

std::optional<int64_t> GgufValue::as_int() const {
  if (const auto* u = std::get_if<uint64_t>(&v)) {
    if (*u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(*u);
  }
  if (const auto* i = std::get_if<int64_t>(&v)) return *i;
  if (const auto* b = std::get_if<bool>(&v)) return *b ? 1 : 0;
  return std::nullopt;
}

std::optional<double> GgufValue::as_float() const {
  if (const auto* d = std::get_if<double>(&v)) return *d;
  if (const auto* u = std::get_if<uint64_t>(&v)) return static_cast<double>(*u);
  if (const auto* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
  return std::nullopt;
}

const std::string* GgufValue::as_string() const { return std::get_if<std::string>(&v); }

const GgufArray* GgufValue::as_array() const {
  const auto* a = std::get_if<std::shared_ptr<GgufArray>>(&v);
  return a != nullptr ? a->get() : nullptr;
}

namespace gguf_detail {

size_t scalar_size(GgufType t) {
  switch (t) {
    case GgufType::UINT8:
    case GgufType::INT8:
    case GgufType::BOOL:
      return 1;
    case GgufType::UINT16:
    case GgufType::INT16:
      return 2;
    case GgufType::UINT32:
    case GgufType::INT32:
    case GgufType::FLOAT32:
      return 4;
    case GgufType::UINT64:
    case GgufType::INT64:
    case GgufType::FLOAT64:
      return 8;
    case GgufType::STRING:
    case GgufType::ARRAY:
      return 0;
  }
  return 0;
}

size_t min_encoded_size(GgufType t) {
  if (t == GgufType::STRING) return sizeof(uint64_t);                    // length
  if (t == GgufType::ARRAY) return sizeof(uint32_t) + sizeof(uint64_t);  // type, count
  return scalar_size(t);
}

}  // namespace gguf_detail
}  // namespace pagoda

#include "gguf/gguf_value_io.h"

#include <algorithm>
#include <bit>
#include <limits>
#include <memory>
#include <utility>

namespace pagoda::gguf_detail {

static_assert(std::endian::native == std::endian::little,
              "the GGUF reader and writer copy little-endian fields as they are");

namespace {

Status truncated(const Cursor& c, std::string_view what, size_t need) {
  return error("truncated: {} needs {} bytes at offset {}, but the file ends at {}", what, need,
               c.pos(), c.size());
}

template <typename Disk, typename Stored>
Status read_scalar(Cursor& c, GgufType t, GgufValue& out) {
  Disk x{};
  if (!c.read(x)) return truncated(c, fmt::format("a {} value", gguf_type_name(t)), sizeof(Disk));
  out.v = static_cast<Stored>(x);
  return Status::ok();
}

Status read_string_value(Cursor& c, std::string& out) {
  if (c.remaining() < sizeof(uint64_t)) return truncated(c, "a string length", sizeof(uint64_t));
  if (!c.read_string(out))
    return error("string length {} at offset {} runs past the end of the file ({} bytes)",
                 c.peek_u64(), c.pos(), c.size());
  return Status::ok();
}

Status read_array(Cursor& c, int depth, GgufValue& out, uint64_t& budget) {
  size_t at = c.pos();
  if (depth >= kMaxArrayDepth)
    return error("arrays nested more than {} deep at offset {}", kMaxArrayDepth, at);
  uint32_t type_id = 0;
  if (!c.read(type_id)) return truncated(c, "an array element type", sizeof(type_id));
  auto elem_type = gguf_type_from_id(type_id);
  if (!elem_type) return error("unknown array element type {} at offset {}", type_id, at);
  uint64_t count = 0;
  if (!c.read(count)) return truncated(c, "an array count", sizeof(count));
  // Checked before reserving so a corrupt count cannot ask for terabytes.
  size_t min_size = min_encoded_size(*elem_type);
  if (count > c.remaining() / min_size)
    return error(
        "array count {} at offset {} is impossible: each {} element takes at least {} bytes "
        "and only {} bytes remain in the file",
        count, at + sizeof(type_id), gguf_type_name(*elem_type), min_size, c.remaining());
  if (count > budget)
    return error(
        "array count {} at offset {} would take the file past {} metadata values in total; the "
        "count is corrupt",
        count, at + sizeof(type_id), kMaxMetadataValues);
  auto arr = std::make_shared<GgufArray>();
  arr->elem_type = *elem_type;
  arr->values.reserve(std::min(count, kMaxReserve));
  for (uint64_t i = 0; i < count; ++i) {
    Status st = read_value(c, *elem_type, depth + 1, arr->values.emplace_back(), budget);
    if (!st) return error("element {}: {}", i, st.message());
  }
  out.v = std::move(arr);
  return Status::ok();
}

const char* holds(const GgufValue& v) {
  static constexpr const char* kNames[] = {
      "an unsigned integer", "a signed integer", "a float", "a bool", "a string", "an array"};
  return v.v.valueless_by_exception() ? "nothing" : kNames[v.v.index()];
}

Status mismatch(const GgufValue& v) {
  return error("a {} value holds {}", gguf_type_name(v.type), holds(v));
}

template <typename T>
Status append_unsigned(std::string& out, const GgufValue& v) {
  uint64_t x = 0;
  if (const auto* u = std::get_if<uint64_t>(&v.v)) {
    x = *u;
  } else if (const auto* i = std::get_if<int64_t>(&v.v); i != nullptr && *i >= 0) {
    x = static_cast<uint64_t>(*i);
  } else if (i != nullptr) {
    return error("a {} value holds the negative number {}", gguf_type_name(v.type), *i);
  } else {
    return mismatch(v);
  }
  if (x > std::numeric_limits<T>::max())
    return error("a {} value holds {}, which does not fit", gguf_type_name(v.type), x);
  append_le<T>(out, static_cast<T>(x));
  return Status::ok();
}

template <typename T>
Status append_signed(std::string& out, const GgufValue& v) {
  int64_t x = 0;
  if (const auto* i = std::get_if<int64_t>(&v.v)) {
    x = *i;
  } else if (const auto* u = std::get_if<uint64_t>(&v.v)) {
    if (*u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      return error("a {} value holds {}, which does not fit", gguf_type_name(v.type), *u);
    x = static_cast<int64_t>(*u);
  } else {
    return mismatch(v);
  }
  if (x < std::numeric_limits<T>::min() || x > std::numeric_limits<T>::max())
    return error("a {} value holds {}, which does not fit", gguf_type_name(v.type), x);
  append_le<T>(out, static_cast<T>(x));
  return Status::ok();
}

}  // namespace

Status read_value(Cursor& c, GgufType t, int depth, GgufValue& out, uint64_t& budget) {
  // Arrays check their whole count up front, so this only trips on a top-level value.
  if (budget == 0)
    return error("the file holds more than {} metadata values in total", kMaxMetadataValues);
  --budget;
  out.type = t;
  switch (t) {
    case GgufType::UINT8:
      return read_scalar<uint8_t, uint64_t>(c, t, out);
    case GgufType::INT8:
      return read_scalar<int8_t, int64_t>(c, t, out);
    case GgufType::UINT16:
      return read_scalar<uint16_t, uint64_t>(c, t, out);
    case GgufType::INT16:
      return read_scalar<int16_t, int64_t>(c, t, out);
    case GgufType::UINT32:
      return read_scalar<uint32_t, uint64_t>(c, t, out);
    case GgufType::INT32:
      return read_scalar<int32_t, int64_t>(c, t, out);
    case GgufType::UINT64:
      return read_scalar<uint64_t, uint64_t>(c, t, out);
    case GgufType::INT64:
      return read_scalar<int64_t, int64_t>(c, t, out);
    case GgufType::FLOAT32:
      return read_scalar<float, double>(c, t, out);
    case GgufType::FLOAT64:
      return read_scalar<double, double>(c, t, out);
    case GgufType::BOOL: {
      size_t at = c.pos();
      uint8_t b = 0;
      if (!c.read(b)) return truncated(c, "a BOOL value", 1);
      // Anything but 0 or 1 means the bytes are not what the writer meant.
      if (b > 1) return error("BOOL value {} at offset {} is neither 0 nor 1", b, at);
      out.v = b == 1;
      return Status::ok();
    }
    case GgufType::STRING: {
      std::string s;
      PAGODA_TRY(read_string_value(c, s));
      out.v = std::move(s);
      return Status::ok();
    }
    case GgufType::ARRAY:
      return read_array(c, depth, out, budget);
  }
  return error("unknown value type {}", static_cast<uint32_t>(t));
}

Status append_value(std::string& out, const GgufValue& v, int depth) {
  switch (v.type) {
    case GgufType::UINT8:
      return append_unsigned<uint8_t>(out, v);
    case GgufType::UINT16:
      return append_unsigned<uint16_t>(out, v);
    case GgufType::UINT32:
      return append_unsigned<uint32_t>(out, v);
    case GgufType::UINT64:
      return append_unsigned<uint64_t>(out, v);
    case GgufType::INT8:
      return append_signed<int8_t>(out, v);
    case GgufType::INT16:
      return append_signed<int16_t>(out, v);
    case GgufType::INT32:
      return append_signed<int32_t>(out, v);
    case GgufType::INT64:
      return append_signed<int64_t>(out, v);
    case GgufType::FLOAT32:
    case GgufType::FLOAT64: {
      const auto* d = std::get_if<double>(&v.v);
      if (d == nullptr) return mismatch(v);
      if (v.type == GgufType::FLOAT32)
        append_le<float>(out, static_cast<float>(*d));
      else
        append_le<double>(out, *d);
      return Status::ok();
    }
    case GgufType::BOOL: {
      const auto* b = std::get_if<bool>(&v.v);
      if (b == nullptr) return mismatch(v);
      append_le<uint8_t>(out, *b ? 1 : 0);
      return Status::ok();
    }
    case GgufType::STRING: {
      const auto* s = std::get_if<std::string>(&v.v);
      if (s == nullptr) return mismatch(v);
      append_string(out, *s);
      return Status::ok();
    }
    case GgufType::ARRAY: {
      const GgufArray* arr = v.as_array();
      if (arr == nullptr)
        return std::holds_alternative<std::shared_ptr<GgufArray>>(v.v)
                   ? error("an ARRAY value holds a null array")
                   : mismatch(v);
      if (depth >= kMaxArrayDepth) return error("arrays nested more than {} deep", kMaxArrayDepth);
      if (!gguf_type_from_id(static_cast<uint32_t>(arr->elem_type)))
        return error("unknown array element type {}", static_cast<uint32_t>(arr->elem_type));
      append_le<uint32_t>(out, static_cast<uint32_t>(arr->elem_type));
      append_le<uint64_t>(out, arr->values.size());
      for (size_t i = 0; i < arr->values.size(); ++i) {
        const GgufValue& e = arr->values[i];
        if (e.type != arr->elem_type)
          return error("element {} has type {}, but the array holds {}", i, gguf_type_name(e.type),
                       gguf_type_name(arr->elem_type));
        Status st = append_value(out, e, depth + 1);
        if (!st) return error("element {}: {}", i, st.message());
      }
      return Status::ok();
    }
  }
  return error("unknown value type {}", static_cast<uint32_t>(v.type));
}

}  // namespace pagoda::gguf_detail

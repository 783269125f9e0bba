#include "gguf/gguf_file.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <numeric>
#include <utility>

#include "base/printable.h"
#include "gguf/gguf_cursor.h"
#include "gguf/gguf_value_io.h"

namespace pagoda {
namespace {

using gguf_detail::Cursor;

constexpr char kMagic[4] = {'G', 'G', 'U', 'F'};
constexpr uint32_t kMaxDims = 4;  // ggml's GGML_MAX_DIMS
// Lower bounds on the bytes one entry takes, to reject counts the file cannot hold before
// reserving memory for them: key length + type + the smallest value; name length +
// n_dims + type + offset (each dimension adds 8 more).
// The largest models have tens of thousands of tensors; this only stops a corrupt count
// from walking the tensor data as descriptions, at about 100 bytes of memory each.
constexpr uint64_t kMaxTensors = uint64_t{1} << 20;
constexpr size_t kMinKvBytes = 8 + 4 + 1;
constexpr size_t kMinTensorInfoBytes = 8 + 4 + 4 + 8;

Status truncated(const std::string& path, const Cursor& c, std::string_view field, size_t need) {
  return error("{}: {}: truncated: needs {} bytes at offset {}, but the file ends at {}", path,
               field, need, c.pos(), c.size());
}

// Keys and tensor names share the string encoding; `field` is built only on failure.
template <typename Field>
Status read_name(const std::string& path, Cursor& c, std::string& out, Field field) {
  if (c.remaining() < sizeof(uint64_t)) return truncated(path, c, field(), sizeof(uint64_t));
  if (!c.read_string(out))
    return error("{}: {}: length {} at offset {} runs past the end of the file ({} bytes)", path,
                 field(), c.peek_u64(), c.pos(), c.size());
  if (out.empty()) return error("{}: {}: is empty (at offset {})", path, field(), c.pos() - 8);
  return Status::ok();
}

}  // namespace

int64_t GgufTensor::num_elements() const {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
}

Result<GgufFile> GgufFile::open(const std::string& path) {
  auto mapped = MappedFile::open(path);
  if (!mapped) return mapped.status();
  GgufFile f;
  f.file_ = std::move(mapped).value();
  Status st = f.parse();
  if (!st) return st;
  return f;
}

Status GgufFile::parse() {
  const std::string& path = file_.path();
  Cursor c(file_.data(), file_.size());

  char magic[4] = {};
  if (!c.read(magic)) return truncated(path, c, "header magic", sizeof(magic));
  if (std::memcmp(magic, kMagic, sizeof(magic)) != 0)
    return error(
        "{}: header magic: found bytes {:02x} {:02x} {:02x} {:02x}, expected 47 47 55 46 "
        "(\"GGUF\"); this is not a GGUF file",
        path, static_cast<uint8_t>(magic[0]), static_cast<uint8_t>(magic[1]),
        static_cast<uint8_t>(magic[2]), static_cast<uint8_t>(magic[3]));

  if (!c.read(version_)) return truncated(path, c, "header version", sizeof(version_));
  // A big-endian file stores its version (1..3) byte-swapped, so the low half reads as 0.
  uint32_t swapped = __builtin_bswap32(version_);
  if ((version_ & 0xffff) == 0 && swapped >= 1 && swapped <= 3)
    return error(
        "{}: header version: the file is big-endian (version {}); only little-endian "
        "GGUF is supported",
        path, swapped);
  if (version_ == 1)
    return error(
        "{}: header version: GGUF version 1 is not supported (it predates 64-bit "
        "counts); convert the file to version 3",
        path);
  if (version_ != 2 && version_ != 3)
    return error("{}: header version: unsupported GGUF version {}; Pagoda reads versions 2 and 3",
                 path, version_);

  uint64_t n_tensors = 0, n_kv = 0;
  if (!c.read(n_tensors)) return truncated(path, c, "header tensor_count", sizeof(n_tensors));
  if (!c.read(n_kv)) return truncated(path, c, "header metadata_kv_count", sizeof(n_kv));
  if (n_kv > c.remaining() / kMinKvBytes)
    return error(
        "{}: header metadata_kv_count: {} key/value pairs cannot fit in the {} bytes "
        "left in the file (each takes at least {})",
        path, n_kv, c.remaining(), kMinKvBytes);
  if (n_tensors > c.remaining() / kMinTensorInfoBytes)
    return error(
        "{}: header tensor_count: {} tensor descriptions cannot fit in the {} bytes left "
        "in the file (each takes at least {})",
        path, n_tensors, c.remaining(), kMinTensorInfoBytes);

  if (n_kv > gguf_detail::kMaxMetadataValues)
    return error("{}: header metadata_kv_count: {} is past the limit of {}; the count is corrupt",
                 path, n_kv, gguf_detail::kMaxMetadataValues);
  if (n_tensors > kMaxTensors)
    return error("{}: header tensor_count: {} is past the limit of {}; the count is corrupt", path,
                 n_tensors, kMaxTensors);
  PAGODA_TRY(parse_metadata(c, n_kv));
  PAGODA_TRY(parse_tensor_infos(c, n_tensors));
  return place_tensors(c.pos());
}

Status GgufFile::parse_metadata(Cursor& c, uint64_t count) {
  const std::string& path = file_.path();
  kv_.reserve(std::min(count, gguf_detail::kMaxReserve));
  uint64_t budget = gguf_detail::kMaxMetadataValues;
  for (uint64_t i = 0; i < count; ++i) {
    std::string key;
    PAGODA_TRY(read_name(path, c, key, [&] { return fmt::format("metadata #{} key", i); }));
    if (auto dup = kv_index_.find(key); dup != kv_index_.end())
      return error("{}: metadata {}: duplicate key (entries #{} and #{})", path, in_quotes(key),
                   dup->second, i);
    uint32_t type_id = 0;
    if (!c.read(type_id))
      return truncated(path, c, fmt::format("metadata {} type", in_quotes(key)), sizeof(type_id));
    auto type = gguf_type_from_id(type_id);
    if (!type)
      return error("{}: metadata {} type: unknown value type {} at offset {}", path, in_quotes(key),
                   type_id, c.pos() - sizeof(type_id));
    GgufValue value;
    Status st = gguf_detail::read_value(c, *type, 0, value, budget);
    if (!st) return error("{}: metadata {}: {}", path, in_quotes(key), st.message());
    kv_index_.emplace(key, kv_.size());
    kv_.emplace_back(std::move(key), std::move(value));
  }

  if (const GgufValue* a = find("general.alignment")) {
    if (a->type != GgufType::UINT32)
      return error("{}: general.alignment: has type {}, but must be UINT32", path,
                   gguf_type_name(a->type));
    uint64_t al = std::get<uint64_t>(a->v);
    if (al == 0 || (al & (al - 1)) != 0)
      return error("{}: general.alignment: {} is not a power of two", path, al);
    alignment_ = al;
  }
  return Status::ok();
}

Status GgufFile::parse_tensor_infos(Cursor& c, uint64_t count) {
  const std::string& path = file_.path();
  tensors_.reserve(std::min(count, gguf_detail::kMaxReserve));
  for (uint64_t i = 0; i < count; ++i) {
    GgufTensor t;
    PAGODA_TRY(read_name(path, c, t.name, [&] { return fmt::format("tensor #{} name", i); }));
    const std::string& name = t.name;
    if (auto dup = tensor_index_.find(name); dup != tensor_index_.end())
      return error("{}: tensor {}: duplicate tensor name (tensors #{} and #{})", path, in_quotes(name),
                   dup->second, i);

    uint32_t n_dims = 0;
    if (!c.read(n_dims))
      return truncated(path, c, fmt::format("tensor {} n_dims", in_quotes(name)), sizeof(n_dims));
    if (n_dims == 0 || n_dims > kMaxDims)
      return error("{}: tensor {} n_dims: {} dimensions, but GGUF tensors have 1 to {}", path,
                   in_quotes(name), n_dims, kMaxDims);
    int64_t n_elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t ne = 0;
      if (!c.read(ne))
        return truncated(path, c, fmt::format("tensor {} dimension {}", in_quotes(name), d),
                         sizeof(ne));
      if (ne == 0)
        return error("{}: tensor {} dimension {}: is 0; empty tensors are not supported", path,
                     in_quotes(name), d);
      if (ne > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        return error("{}: tensor {} dimension {}: {} does not fit in a signed 64-bit count", path,
                     in_quotes(name), d, ne);
      t.shape.push_back(static_cast<int64_t>(ne));
      if (__builtin_mul_overflow(n_elements, static_cast<int64_t>(ne), &n_elements))
        return error("{}: tensor {} shape: the element count of [{}...] overflows 64 bits", path,
                     in_quotes(name), fmt::join(t.shape, ", "));
    }

    uint32_t type_id = 0;
    if (!c.read(type_id))
      return truncated(path, c, fmt::format("tensor {} type", in_quotes(name)), sizeof(type_id));
    auto info = dtype_info(type_id);
    if (!info)
      return error("{}: tensor {} type: unknown tensor type id {} (not a format Pagoda supports)",
                   path, in_quotes(name), type_id);
    t.type = info->type;
    if (t.shape[0] % info->block_size != 0)
      return error("{}: tensor {} shape: row length {} is not a multiple of the {} block size {}",
                   path, in_quotes(name), t.shape[0], info->name, info->block_size);
    int64_t row = 0, total = 0;
    if (__builtin_mul_overflow(t.shape[0] / info->block_size, info->type_size, &row) ||
        __builtin_mul_overflow(row, n_elements / t.shape[0], &total))
      return error("{}: tensor {} shape: the byte size of [{}] {} overflows 64 bits", path,
                   in_quotes(name), fmt::join(t.shape, ", "), info->name);
    t.nbytes = static_cast<size_t>(total);

    if (!c.read(t.offset))
      return truncated(path, c, fmt::format("tensor {} offset", in_quotes(name)), sizeof(t.offset));
    tensor_index_.emplace(t.name, tensors_.size());
    tensors_.push_back(std::move(t));
  }
  return Status::ok();
}

Status GgufFile::place_tensors(size_t infos_end) {
  const std::string& path = file_.path();
  const size_t size = file_.size();
  // infos_end <= size and alignment_ <= 2^32, so this cannot wrap.
  size_t aligned = (infos_end + alignment_ - 1) / alignment_ * alignment_;
  data_offset_ = std::min(aligned, size);
  for (GgufTensor& t : tensors_) {
    if (t.offset % alignment_ != 0)
      return error("{}: tensor {} offset: {} is not a multiple of general.alignment ({})", path,
                   in_quotes(t.name), t.offset, alignment_);
    uint64_t begin = 0, end = 0;
    if (__builtin_add_overflow(aligned, t.offset, &begin) ||
        __builtin_add_overflow(begin, t.nbytes, &end) || end > size)
      return error(
          "{}: tensor {} data: offset {} + {} bytes from the data section at {} runs "
          "past the end of the file ({} bytes)",
          path, in_quotes(t.name), t.offset, t.nbytes, aligned, size);
    t.data = file_.data() + begin;
    // The kernels read a block's FP16/F32 scale in place, so a tensor the file places
    // below its block's alignment (general.alignment = 1 puts a Q8_0 tensor at an odd
    // address for some header lengths) is used from an aligned copy.
    if (begin % block_alignment(dtype_info(t.type)) != 0) {
      AlignedBuffer copy(t.nbytes);
      if (copy.data() == nullptr)
        return error("{}: tensor {}: out of memory copying {} bytes to an aligned address (general.alignment = {})",
                     path, in_quotes(t.name), t.nbytes, alignment_);
      std::memcpy(copy.data(), t.data, t.nbytes);
      t.data = copy.data();
      t.realigned = true;
      realigned_.push_back(std::move(copy));
    }
  }

  // Writers lay tensors out one after another; an overlap means a corrupt offset.
  std::vector<size_t> order(tensors_.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return tensors_[a].offset < tensors_[b].offset; });
  for (size_t k = 1; k < order.size(); ++k) {
    const GgufTensor& prev = tensors_[order[k - 1]];
    const GgufTensor& next = tensors_[order[k]];
    if (prev.offset + prev.nbytes > next.offset)
      return error("{}: tensor {} offset: data at {} overlaps tensor {} ({} bytes at {})", path,
                   in_quotes(next.name), next.offset, in_quotes(prev.name), prev.nbytes, prev.offset);
  }
  return Status::ok();
}

const GgufValue* GgufFile::find(std::string_view key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

std::optional<int64_t> GgufFile::get_int(std::string_view key) const {
  const GgufValue* v = find(key);
  return v != nullptr ? v->as_int() : std::nullopt;
}

std::optional<double> GgufFile::get_float(std::string_view key) const {
  const GgufValue* v = find(key);
  return v != nullptr ? v->as_float() : std::nullopt;
}

std::optional<std::string> GgufFile::get_string(std::string_view key) const {
  const GgufValue* v = find(key);
  const std::string* s = v != nullptr ? v->as_string() : nullptr;
  return s != nullptr ? std::optional<std::string>(*s) : std::nullopt;
}

std::optional<bool> GgufFile::get_bool(std::string_view key) const {
  const GgufValue* v = find(key);
  const bool* b = v != nullptr ? std::get_if<bool>(&v->v) : nullptr;
  return b != nullptr ? std::optional<bool>(*b) : std::nullopt;
}

const GgufArray* GgufFile::get_array(std::string_view key) const {
  const GgufValue* v = find(key);
  return v != nullptr ? v->as_array() : nullptr;
}

const GgufTensor* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace pagoda

#include "gguf/gguf_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <limits>
#include <memory>
#include <set>
#include <utility>

#include "gguf/gguf_value_io.h"

namespace pagoda {
namespace {

using gguf_detail::append_le;
using gguf_detail::append_string;

constexpr uint32_t kVersion = 3;
constexpr uint64_t kDefaultAlignment = 32;
constexpr std::string_view kAlignmentKey = "general.alignment";
constexpr uint32_t kMaxDims = 4;

uint64_t align_up(uint64_t n, uint64_t a) { return (n + a - 1) / a * a; }

// The output under a temporary name until commit() renames it into place; destroying it
// uncommitted (an error return, an exception from a fill callback) closes and removes it.
class TempOutput {
 public:
  explicit TempOutput(std::string path) : path_(std::move(path)) {
    static std::atomic<uint64_t> counter{0};
    tmp_ = fmt::format("{}.tmp-{}-{}", path_, ::getpid(), counter++);
  }
  TempOutput(const TempOutput&) = delete;
  TempOutput& operator=(const TempOutput&) = delete;
  ~TempOutput() {
    if (fd_ >= 0) ::close(fd_);
    if (created_ && !committed_) ::unlink(tmp_.c_str());
  }

  Status open() {
    fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd_ < 0) return error("{}: cannot create {}: {}", path_, tmp_, std::strerror(errno));
    created_ = true;
    return Status::ok();
  }

  Status write(const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    while (n > 0) {
      ssize_t w = ::write(fd_, p, n);
      if (w < 0) {
        if (errno == EINTR) continue;
        return error("{}: writing {} failed at byte {}: {}", path_, tmp_, written_,
                     std::strerror(errno));
      }
      p += w;
      n -= static_cast<size_t>(w);
      written_ += static_cast<uint64_t>(w);
    }
    return Status::ok();
  }

  Status pad_to(uint64_t alignment) {
    static constexpr uint8_t kZeros[256] = {};
    uint64_t pad = align_up(written_, alignment) - written_;
    while (pad > 0) {
      size_t n = static_cast<size_t>(std::min<uint64_t>(pad, sizeof(kZeros)));
      PAGODA_TRY(write(kZeros, n));
      pad -= n;
    }
    return Status::ok();
  }

  uint64_t written() const { return written_; }

  Status commit() {
    int fd = std::exchange(fd_, -1);
    if (::close(fd) != 0)
      return error("{}: closing {} failed: {}", path_, tmp_, std::strerror(errno));
    if (std::rename(tmp_.c_str(), path_.c_str()) != 0)
      return error("{}: renaming {} into place failed: {}", path_, tmp_, std::strerror(errno));
    committed_ = true;
    return Status::ok();
  }

 private:
  std::string path_;
  std::string tmp_;
  int fd_ = -1;
  bool created_ = false;
  bool committed_ = false;
  uint64_t written_ = 0;
};

// The byte size of a tensor, or why its shape cannot be written.
Status tensor_nbytes(const std::vector<int64_t>& shape, DType type, size_t& out) {
  auto info = dtype_info(static_cast<uint32_t>(type));
  if (!info) return error("unknown tensor type id {}", static_cast<uint32_t>(type));
  if (shape.empty() || shape.size() > kMaxDims)
    return error("has {} dimensions, but GGUF tensors have 1 to {}", shape.size(), kMaxDims);
  int64_t n = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] <= 0) return error("dimension {} is {}; it must be positive", d, shape[d]);
    if (__builtin_mul_overflow(n, shape[d], &n)) return error("element count overflows 64 bits");
  }
  if (shape[0] % info->block_size != 0)
    return error("row length {} is not a multiple of the {} block size {}", shape[0], info->name,
                 info->block_size);
  int64_t row = 0, total = 0;
  if (__builtin_mul_overflow(shape[0] / info->block_size, info->type_size, &row) ||
      __builtin_mul_overflow(row, n / shape[0], &total))
    return error("byte size overflows 64 bits");
  out = static_cast<size_t>(total);
  return Status::ok();
}

}  // namespace

void GgufWriter::set(const std::string& key, GgufValue value) {
  for (auto& [k, v] : kv_) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  kv_.emplace_back(key, std::move(value));
}

void GgufWriter::set_u32(const std::string& key, uint32_t v) {
  set(key, GgufValue{GgufType::UINT32, uint64_t{v}});
}
void GgufWriter::set_i32(const std::string& key, int32_t v) {
  set(key, GgufValue{GgufType::INT32, int64_t{v}});
}
void GgufWriter::set_f32(const std::string& key, float v) {
  set(key, GgufValue{GgufType::FLOAT32, double{v}});
}
void GgufWriter::set_bool(const std::string& key, bool v) {
  set(key, GgufValue{GgufType::BOOL, v});
}
void GgufWriter::set_string(const std::string& key, const std::string& v) {
  set(key, GgufValue{GgufType::STRING, v});
}

namespace {
template <typename T, typename Stored>
GgufValue make_array(GgufType elem, const std::vector<T>& values) {
  auto arr = std::make_shared<GgufArray>();
  arr->elem_type = elem;
  arr->values.resize(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    // In place rather than push_back(GgufValue{...}): GCC 12 at -O3 reports a bogus
    // maybe-uninitialized on moving the variant's string alternative.
    arr->values[i].type = elem;
    arr->values[i].v.template emplace<Stored>(values[i]);
  }
  return GgufValue{GgufType::ARRAY, std::move(arr)};
}
}  // namespace

void GgufWriter::set_string_array(const std::string& key, const std::vector<std::string>& v) {
  set(key, make_array<std::string, std::string>(GgufType::STRING, v));
}
void GgufWriter::set_f32_array(const std::string& key, const std::vector<float>& v) {
  set(key, make_array<float, double>(GgufType::FLOAT32, v));
}
void GgufWriter::set_i32_array(const std::string& key, const std::vector<int32_t>& v) {
  set(key, make_array<int32_t, int64_t>(GgufType::INT32, v));
}

void GgufWriter::add_tensor(const std::string& name, std::vector<int64_t> shape, DType type,
                            Fill fill) {
  tensors_.push_back(Pending{name, std::move(shape), type, std::move(fill), std::nullopt});
}

void GgufWriter::add_tensor_bytes(const std::string& name, std::vector<int64_t> shape, DType type,
                                  const void* bytes, size_t nbytes) {
  auto copy = std::make_shared<std::vector<uint8_t>>(static_cast<const uint8_t*>(bytes),
                                                     static_cast<const uint8_t*>(bytes) + nbytes);
  Fill fill = [copy](uint8_t* dst) { std::memcpy(dst, copy->data(), copy->size()); };
  tensors_.push_back(Pending{name, std::move(shape), type, std::move(fill), nbytes});
}

Status GgufWriter::check_tensor(const Pending& t) const {
  if (t.name.empty()) return error("a tensor has an empty name");
  size_t nbytes = 0;
  Status st = tensor_nbytes(t.shape, t.type, nbytes);
  if (!st) return error("tensor '{}': {}", t.name, st.message());
  if (t.given_nbytes && *t.given_nbytes != nbytes)
    return error("tensor '{}': {} bytes were given, but its shape and type need {}", t.name,
                 *t.given_nbytes, nbytes);
  if (!t.fill) return error("tensor '{}': no fill callback", t.name);
  return Status::ok();
}

Status GgufWriter::encode_header(std::string& out, std::vector<uint64_t>& offsets) const {
  bool has_alignment_key = false;
  for (const auto& kv : kv_) has_alignment_key |= kv.first == kAlignmentKey;
  bool add_alignment_key = !has_alignment_key && alignment_ != kDefaultAlignment;

  out.append("GGUF", 4);
  append_le<uint32_t>(out, kVersion);
  append_le<uint64_t>(out, tensors_.size());
  append_le<uint64_t>(out, kv_.size() + (add_alignment_key ? 1 : 0));

  const GgufValue alignment_value{GgufType::UINT32, uint64_t{alignment_}};
  for (const auto& [key, value] : kv_) {
    if (key.empty()) return error("a metadata key is empty");
    // The layout below follows alignment_, so the key must say the same.
    const GgufValue& v = key == kAlignmentKey ? alignment_value : value;
    append_string(out, key);
    append_le<uint32_t>(out, static_cast<uint32_t>(v.type));
    Status st = gguf_detail::append_value(out, v, 0);
    if (!st) return error("metadata '{}': {}", key, st.message());
  }
  if (add_alignment_key) {
    append_string(out, kAlignmentKey);
    append_le<uint32_t>(out, static_cast<uint32_t>(GgufType::UINT32));
    append_le<uint32_t>(out, static_cast<uint32_t>(alignment_));
  }

  uint64_t offset = 0;
  offsets.clear();
  for (const Pending& t : tensors_) {
    size_t nbytes = 0;
    PAGODA_TRY(tensor_nbytes(t.shape, t.type, nbytes));  // checked already; cannot fail
    append_string(out, t.name);
    append_le<uint32_t>(out, static_cast<uint32_t>(t.shape.size()));
    for (int64_t d : t.shape) append_le<uint64_t>(out, static_cast<uint64_t>(d));
    append_le<uint32_t>(out, static_cast<uint32_t>(t.type));
    append_le<uint64_t>(out, offset);
    offsets.push_back(offset);
    if (__builtin_add_overflow(offset, align_up(nbytes, alignment_), &offset))
      return error("tensor '{}': the data section passes 2^64 bytes", t.name);
  }
  return Status::ok();
}

Status GgufWriter::write(const std::string& path) const {
  if (alignment_ == 0 || (alignment_ & (alignment_ - 1)) != 0 ||
      alignment_ > std::numeric_limits<uint32_t>::max())
    return error("{}: alignment {} is not a power of two that fits in 32 bits", path, alignment_);
  std::set<std::string_view> names;
  for (const Pending& t : tensors_) {
    Status st = check_tensor(t);
    if (!st) return error("{}: {}", path, st.message());
    if (!names.insert(t.name).second) return error("{}: tensor '{}': added twice", path, t.name);
  }
  std::string header;
  std::vector<uint64_t> offsets;
  Status st = encode_header(header, offsets);
  if (!st) return error("{}: {}", path, st.message());

  TempOutput out(path);
  PAGODA_TRY(out.open());
  PAGODA_TRY(out.write(header.data(), header.size()));
  PAGODA_TRY(out.pad_to(alignment_));
  const uint64_t data_start = out.written();

  // One buffer reused for every tensor: only the largest tensor is ever in memory.
  std::vector<uint8_t> buf;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const Pending& t = tensors_[i];
    size_t nbytes = 0;
    PAGODA_TRY(tensor_nbytes(t.shape, t.type, nbytes));
    if (out.written() - data_start != offsets[i])
      return error("{}: tensor '{}': internal layout error (at {}, expected {})", path, t.name,
                   out.written() - data_start, offsets[i]);
    buf.assign(nbytes, 0);  // zeroed so a short fill cannot leak old bytes into the file
    try {
      t.fill(buf.data());
    } catch (const std::exception& e) {
      return error("{}: tensor '{}': producing its data failed: {}", path, t.name, e.what());
    } catch (...) {
      return error("{}: tensor '{}': producing its data failed", path, t.name);
    }
    PAGODA_TRY(out.write(buf.data(), buf.size()));
    PAGODA_TRY(out.pad_to(alignment_));
  }
  return out.commit();
}

}  // namespace pagoda

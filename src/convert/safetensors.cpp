#include "convert/safetensors.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "base/printable.h"
#include "convert/hf_config.h"

namespace pagoda {
namespace {

using nlohmann::json;

// The safetensors reference implementation refuses headers above 100 MB; a larger length
// is a corrupt or hostile file, and checking it first keeps the parse bounded.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

struct DtypeInfo {
  std::string_view name;
  size_t bytes;
  bool readable;
  DType type;
};

constexpr DtypeInfo kDtypes[] = {
    {"F32", 4, true, DType::F32},   {"F16", 2, true, DType::F16},      {"BF16", 2, true, DType::BF16},
    {"F64", 8, false, DType::F32},  {"I64", 8, false, DType::F32},     {"U64", 8, false, DType::F32},
    {"I32", 4, false, DType::F32},  {"U32", 4, false, DType::F32},     {"I16", 2, false, DType::F32},
    {"U16", 2, false, DType::F32},  {"I8", 1, false, DType::F32},      {"U8", 1, false, DType::F32},
    {"BOOL", 1, false, DType::F32}, {"F8_E4M3", 1, false, DType::F32}, {"F8_E5M2", 1, false, DType::F32},
};

const DtypeInfo* find_dtype(std::string_view name) {
  for (const DtypeInfo& d : kDtypes)
    if (d.name == name) return &d;
  return nullptr;
}

// One header entry into t; offsets are checked against the data section of `data_size` bytes.
Status parse_entry(const std::string& path, const std::string& name, const json& e, const uint8_t* data,
                   uint64_t data_size, SafetensorsTensor& t) {
  const std::string where = fmt::format("{}: tensor '{}'", path, printable(name, 200));
  if (!e.is_object()) return error("{}: the header entry is not an object", where);
  const auto dt = e.find("dtype");
  const auto sh = e.find("shape");
  const auto off = e.find("data_offsets");
  if (dt == e.end() || !dt->is_string()) return error("{}: 'dtype' is missing or not a string", where);
  if (sh == e.end() || !sh->is_array()) return error("{}: 'shape' is missing or not a list", where);
  if (off == e.end() || !off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() ||
      !(*off)[1].is_number_unsigned())
    return error("{}: 'data_offsets' must be a list of two non-negative integers", where);
  const std::string dtype = dt->get<std::string>();
  const DtypeInfo* info = find_dtype(dtype);
  if (info == nullptr)
    return error("{}: unknown dtype '{}' (safetensors defines F64, F32, F16, BF16, I64 ... BOOL)", where,
                 printable(dtype, 40));
  if (sh->size() > 8) return error("{}: {} dimensions (at most 8 are accepted)", where, sh->size());
  uint64_t elements = 1;
  t.shape.clear();
  for (const json& d : *sh) {
    if (!d.is_number_unsigned()) return error("{}: the shape holds a negative or non-integer dimension", where);
    const uint64_t n = d.get<uint64_t>();
    if (n > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
        (n != 0 && elements > std::numeric_limits<uint64_t>::max() / n))
      return error("{}: the shape's element count overflows", where);
    elements *= n;
    t.shape.push_back(static_cast<int64_t>(n));
  }
  if (elements > std::numeric_limits<uint64_t>::max() / info->bytes)
    return error("{}: the shape's byte count overflows", where);
  const uint64_t begin = (*off)[0].get<uint64_t>(), end = (*off)[1].get<uint64_t>();
  if (begin > end) return error("{}: data_offsets [{}, {}] run backwards", where, begin, end);
  if (end > data_size)
    return error("{}: data_offsets [{}, {}] run past the end of the data ({} bytes; truncated file?)", where, begin,
                 end, data_size);
  if (end - begin != elements * info->bytes)
    return error("{}: {} bytes of data for a {} tensor of {} elements ({} bytes expected)", where, end - begin, dtype,
                 elements, elements * info->bytes);
  t.name = name;
  t.dtype = dtype;
  t.readable = info->readable;
  t.type = info->type;
  t.data = data + begin;
  t.nbytes = static_cast<size_t>(end - begin);
  return Status::ok();
}

}  // namespace

int64_t SafetensorsTensor::num_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t SafetensorsTensor::rows() const {
  int64_t n = 1;
  for (size_t i = 0; i + 1 < shape.size(); ++i) n *= shape[i];
  return n;
}

Result<std::vector<SafetensorsTensor>> parse_safetensors(const uint8_t* bytes, size_t size, const std::string& path) {
  if (size < 8) return error("{}: {} bytes is too short for a safetensors file (truncated?)", path, size);
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | bytes[i];
  if (header_len > kMaxHeaderBytes)
    return error("{}: header length {} is above 100 MB (not a safetensors file?)", path, header_len);
  if (header_len > size - 8)
    return error("{}: header length {} runs past the end of the file ({} bytes; truncated?)", path, header_len, size);
  const char* h = reinterpret_cast<const char*>(bytes + 8);
  json header = json::parse(h, h + header_len, nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded()) return error("{}: the header is not valid JSON", path);
  if (!header.is_object()) return error("{}: the header is not a JSON object", path);
  const uint8_t* data = bytes + 8 + header_len;
  const uint64_t data_size = size - 8 - header_len;
  std::vector<SafetensorsTensor> out;
  out.reserve(header.size());
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;
    SafetensorsTensor t;
    PAGODA_TRY(parse_entry(path, name, entry, data, data_size, t));
    out.push_back(std::move(t));
  }
  std::sort(out.begin(), out.end(), [](const SafetensorsTensor& a, const SafetensorsTensor& b) {
    return a.data != b.data ? a.data < b.data : a.nbytes < b.nbytes;
  });
  for (size_t i = 1; i < out.size(); ++i)
    if (out[i].data < out[i - 1].data + out[i - 1].nbytes)
      return error("{}: the data of tensors '{}' and '{}' overlap", path, printable(out[i - 1].name, 200),
                   printable(out[i].name, 200));
  return out;
}

Result<SafetensorsSet> SafetensorsSet::open_files(const std::vector<std::string>& paths) {
  if (paths.empty()) return error("no safetensors files given");
  SafetensorsSet s;
  s.files_.reserve(paths.size());
  std::set<std::string, std::less<>> seen;
  for (const std::string& p : paths) {
    auto f = MappedFile::open(p);
    if (!f) return f.status();
    auto tensors = parse_safetensors(f->data(), f->size(), p);
    if (!tensors) return tensors.status();
    for (SafetensorsTensor& t : *tensors) {
      if (!seen.insert(t.name).second)
        return error("{}: tensor '{}' is also in an earlier shard", p, printable(t.name, 200));
      t.file = s.files_.size();
      s.tensors_.push_back(std::move(t));
    }
    s.files_.push_back(std::move(f.value()));
  }
  return s;
}

Result<SafetensorsSet> SafetensorsSet::open_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  const fs::path index = fs::path(dir) / "model.safetensors.index.json";
  std::error_code ec;
  if (fs::exists(index, ec)) {
    auto j = read_json_file(index.string());
    if (!j) return j.status();
    const auto map = j->find("weight_map");
    if (map == j->end() || !map->is_object())
      return error("{}: 'weight_map' is missing or not an object", index.string());
    std::vector<std::string> shards;
    for (const auto& [name, file] : map->items()) {
      if (!file.is_string())
        return error("{}: the shard of '{}' is not a file name", index.string(), printable(name, 200));
      const std::string f = file.get<std::string>();
      if (f.empty() || f.find('/') != std::string::npos || f.find('\\') != std::string::npos || f == "..")
        return error("{}: shard name '{}' is not a plain file name", index.string(), printable(f, 200));
      if (std::find(shards.begin(), shards.end(), f) == shards.end()) shards.push_back(f);
    }
    std::sort(shards.begin(), shards.end());
    std::vector<std::string> paths;
    for (const std::string& f : shards) paths.push_back((fs::path(dir) / f).string());
    auto set = open_files(paths);
    if (!set) return set.status();
    for (const auto& [name, file] : map->items())
      if (set->find(name) == nullptr)
        return error("{}: tensor '{}' is listed in {} but not found there", index.string(), printable(name, 200),
                     file.get<std::string>());
    return set;
  }
  std::vector<std::string> paths;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->path().extension() == ".safetensors" && it->is_regular_file(ec)) paths.push_back(it->path().string());
  if (ec) return error("{}: cannot list the folder: {}", dir, ec.message());
  if (paths.empty()) return error("{}: no *.safetensors weights (PyTorch .bin checkpoints are not supported)", dir);
  std::sort(paths.begin(), paths.end());
  return open_files(paths);
}

const SafetensorsTensor* SafetensorsSet::find(std::string_view name) const {
  for (const SafetensorsTensor& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

void SafetensorsSet::drop_pages(const SafetensorsTensor& t) const {
  const MappedFile& f = files_[t.file];
  f.drop_pages(static_cast<size_t>(t.data - f.data()), t.nbytes);
}

}  // namespace pagoda

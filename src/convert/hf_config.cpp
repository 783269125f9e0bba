#include "convert/hf_config.h"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>

#include "base/printable.h"

namespace pagoda {

using nlohmann::json;

Result<std::optional<json>> read_optional_json_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::optional<json>();
  auto j = read_json_file(path);
  if (!j) return j.status();
  return std::optional<json>(std::move(j.value()));
}

Result<json> read_json_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return error("{}: no such file", path);
  if (std::filesystem::is_directory(path, ec)) return error("{}: is a directory, not a JSON file", path);
  std::ifstream in(path, std::ios::binary);
  if (!in) return error("{}: cannot be opened", path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return error("{}: read failed", path);
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return error("{}: not valid JSON", path);
  return j;
}

Result<HfConfig> HfConfig::read(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / "config.json").string();
  auto j = read_json_file(path);
  if (!j) return j.status();
  if (!j->is_object()) return error("{}: not a JSON object", path);
  return from_json(std::move(j.value()), path);
}

HfConfig HfConfig::from_json(json j, std::string path) {
  HfConfig c;
  if (j.is_object()) {
    const auto text = j.find("text_config");
    if (text != j.end() && text->is_object())
      for (const auto& [k, v] : text->items()) j[k] = v;
  }
  c.j_ = std::move(j);
  c.path_ = std::move(path);
  return c;
}

const json* HfConfig::find(std::string_view key) const {
  if (!j_.is_object()) return nullptr;
  const auto it = j_.find(key);
  if (it == j_.end() || it->is_null()) return nullptr;
  return &*it;
}

std::string HfConfig::architecture() const {
  const json* a = find("architectures");
  if (a == nullptr || !a->is_array() || a->empty() || !(*a)[0].is_string()) return "";
  return (*a)[0].get<std::string>();
}

std::string HfConfig::model_type() const { return find_string("model_type").value_or(""); }

bool HfConfig::has(std::string_view key) const { return find(key) != nullptr; }

std::optional<int64_t> HfConfig::find_int(std::initializer_list<std::string_view> keys) const {
  for (std::string_view k : keys) {
    const json* v = find(k);
    if (v == nullptr) continue;
    if (v->is_number_integer()) return v->get<int64_t>();
    if (v->is_number_float()) {
      const double d = v->get<double>();
      if (d == static_cast<double>(static_cast<int64_t>(d))) return static_cast<int64_t>(d);
    }
    return std::nullopt;
  }
  return std::nullopt;
}

std::optional<double> HfConfig::find_float(std::initializer_list<std::string_view> keys) const {
  for (std::string_view k : keys) {
    const json* v = find(k);
    if (v == nullptr) continue;
    if (v->is_number()) return v->get<double>();
    return std::nullopt;
  }
  return std::nullopt;
}

std::optional<bool> HfConfig::find_bool(std::string_view key) const {
  const json* v = find(key);
  if (v == nullptr || !v->is_boolean()) return std::nullopt;
  return v->get<bool>();
}

std::optional<std::string> HfConfig::find_string(std::string_view key) const {
  const json* v = find(key);
  if (v == nullptr || !v->is_string()) return std::nullopt;
  return v->get<std::string>();
}

Result<uint32_t> HfConfig::require_u32(std::initializer_list<std::string_view> keys) const {
  auto v = find_int(keys);
  if (!v || *v < 0 || *v > std::numeric_limits<uint32_t>::max())
    return error("{}: '{}' is missing or not a non-negative integer", path_, *keys.begin());
  return static_cast<uint32_t>(*v);
}

Result<double> HfConfig::require_float(std::initializer_list<std::string_view> keys) const {
  auto v = find_float(keys);
  if (!v) return error("{}: '{}' is missing or not a number", path_, *keys.begin());
  return *v;
}

}  // namespace pagoda

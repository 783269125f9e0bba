// A Hugging Face model folder's JSON files: config.json (the hyper-parameters and the
// architecture class), read with the checks a converter needs (a missing key or one of
// the wrong type is an error naming the file and key, never an exception). Reading costs
// one parse of a small file; the result is a plain value, safe to share between threads.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace pagoda {

// The JSON value of a file; missing files and bad JSON are errors naming the path.
Result<nlohmann::json> read_json_file(const std::string& path);
// As read_json_file, or nullopt when the file does not exist.
Result<std::optional<nlohmann::json>> read_optional_json_file(const std::string& path);

class HfConfig {
 public:
  // <dir>/config.json. Multimodal configs keep their text model in "text_config"; its
  // keys are read as if they were at the top level (as llama.cpp's converter does).
  static Result<HfConfig> read(const std::string& dir);
  static HfConfig from_json(nlohmann::json j, std::string path);

  const std::string& path() const { return path_; }
  const nlohmann::json& raw() const { return j_; }
  // The first entry of "architectures" ("BertModel", "LlamaForCausalLM", ...), or "".
  std::string architecture() const;
  std::string model_type() const;  // "model_type", or ""

  bool has(std::string_view key) const;
  // The first of `keys` present (llama.cpp's find_hparam), as a number.
  std::optional<int64_t> find_int(std::initializer_list<std::string_view> keys) const;
  std::optional<double> find_float(std::initializer_list<std::string_view> keys) const;
  std::optional<bool> find_bool(std::string_view key) const;
  std::optional<std::string> find_string(std::string_view key) const;
  // As find_int, but absent or not a non-negative integer that fits 32 bits is an error.
  Result<uint32_t> require_u32(std::initializer_list<std::string_view> keys) const;
  Result<double> require_float(std::initializer_list<std::string_view> keys) const;

 private:
  const nlohmann::json* find(std::string_view key) const;
  nlohmann::json j_;
  std::string path_;
};

}  // namespace pagoda

// Helpers for the gguf tests: a scratch directory, raw file bytes to corrupt, value
// builders and a deep comparison of metadata values.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/gguf_file.h"

namespace pagoda::test {

// A fresh directory under TMPDIR, removed with everything in it at scope exit.
class ScratchDir {
 public:
  ScratchDir() {
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl = std::string(tmp != nullptr ? tmp : "/tmp") + "/pagoda-gguf-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (mkdtemp(buf.data()) == nullptr) ADD_FAILURE() << "mkdtemp failed";
    dir_ = buf.data();
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::string path(std::string_view name) const { return dir_ + "/" + std::string(name); }
  const std::string& dir() const { return dir_; }
  // Names in the directory, to check a failed write left nothing behind.
  std::vector<std::string> entries() const {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(dir_))
      out.push_back(e.path().filename().string());
    return out;
  }

 private:
  std::string dir_;
};

inline std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

// Offset just past the only occurrence of `s` in bytes: where the field after a key or a
// tensor name starts. Fails the test if `s` is missing or appears twice.
inline size_t after(const std::vector<uint8_t>& bytes, std::string_view s) {
  size_t found = SIZE_MAX;
  for (size_t i = 0; i + s.size() <= bytes.size(); ++i) {
    if (std::memcmp(bytes.data() + i, s.data(), s.size()) == 0) {
      EXPECT_EQ(found, SIZE_MAX) << "'" << s << "' appears more than once";
      found = i;
    }
  }
  EXPECT_NE(found, SIZE_MAX) << "'" << s << "' not found";
  return found == SIZE_MAX ? 0 : found + s.size();
}

template <typename T>
void put(std::vector<uint8_t>& bytes, size_t at, T v) {
  ASSERT_LE(at + sizeof(T), bytes.size());
  std::memcpy(bytes.data() + at, &v, sizeof(T));
}

template <typename T>
T get(const std::vector<uint8_t>& bytes, size_t at) {
  T v{};
  std::memcpy(&v, bytes.data() + at, sizeof(T));
  return v;
}

inline GgufValue uval(GgufType t, uint64_t x) { return GgufValue{t, x}; }
inline GgufValue ival(GgufType t, int64_t x) { return GgufValue{t, x}; }
inline GgufValue fval(GgufType t, double x) { return GgufValue{t, x}; }
inline GgufValue sval(std::string s) { return GgufValue{GgufType::STRING, std::move(s)}; }
inline GgufValue bval(bool b) { return GgufValue{GgufType::BOOL, b}; }
inline GgufValue aval(GgufType elem, std::vector<GgufValue> values) {
  auto a = std::make_shared<GgufArray>();
  a->elem_type = elem;
  a->values = std::move(values);
  return GgufValue{GgufType::ARRAY, std::move(a)};
}

// Same on-disk type and same value; FLOAT32 compares as float since that is what the
// file holds. Arrays compare element by element, nested ones recursively.
inline ::testing::AssertionResult same_value(const GgufValue& a, const GgufValue& b) {
  if (a.type != b.type)
    return ::testing::AssertionFailure()
           << "type " << gguf_type_name(a.type) << " vs " << gguf_type_name(b.type);
  if (a.type == GgufType::FLOAT32) {
    float x = static_cast<float>(*a.as_float()), y = static_cast<float>(*b.as_float());
    if (std::memcmp(&x, &y, sizeof(x)) != 0)
      return ::testing::AssertionFailure() << x << " vs " << y;
    return ::testing::AssertionSuccess();
  }
  if (a.type == GgufType::ARRAY) {
    const GgufArray* x = a.as_array();
    const GgufArray* y = b.as_array();
    if (x == nullptr || y == nullptr) return ::testing::AssertionFailure() << "null array";
    if (x->elem_type != y->elem_type)
      return ::testing::AssertionFailure() << "element types differ";
    if (x->values.size() != y->values.size())
      return ::testing::AssertionFailure()
             << "sizes " << x->values.size() << " vs " << y->values.size();
    for (size_t i = 0; i < x->values.size(); ++i) {
      auto r = same_value(x->values[i], y->values[i]);
      if (!r) return ::testing::AssertionFailure() << "element " << i << ": " << r.message();
    }
    return ::testing::AssertionSuccess();
  }
  if (a.type == GgufType::FLOAT64) {
    // Bitwise, so NaN round trips count as equal.
    double x = *a.as_float(), y = *b.as_float();
    if (std::memcmp(&x, &y, sizeof(x)) != 0)
      return ::testing::AssertionFailure() << x << " vs " << y;
    return ::testing::AssertionSuccess();
  }
  if (a.v != b.v) return ::testing::AssertionFailure() << "values differ";
  return ::testing::AssertionSuccess();
}

}  // namespace pagoda::test

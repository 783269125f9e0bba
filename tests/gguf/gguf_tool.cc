// pagoda-gguf-tool: the gguf module from the command line, for the Python oracle tests
// (tests/gguf/test_gguf_vs_python.py) and for looking inside a file by hand.
//   pagoda-gguf-tool dump FILE      metadata and tensor descriptions as JSON on stdout
//   pagoda-gguf-tool copy IN OUT    read IN with GgufFile, write it again with GgufWriter
// Errors go to stderr with exit status 1; usage errors exit with 2.
//
// The JSON is printed by hand: the tool links only pagoda_gguf. Arrays are objects
// {"elem_type": ..., "values": [...]} at every level so nested arrays keep their types;
// NaN and infinities print as NaN / Infinity / -Infinity, which Python's json accepts.
// Tensor bytes are summarised by their 64-bit FNV-1a hash.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"

namespace pagoda {
namespace {

// Length of the valid UTF-8 sequence at s[i], or 0 if the bytes there are not one.
size_t utf8_sequence(std::string_view s, size_t i) {
  auto byte = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  uint8_t b = byte(i);
  size_t n = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xe ? 3 : (b >> 3) == 0x1e ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  uint32_t cp = n == 1 ? b : n == 2 ? (b & 0x1f) : n == 3 ? (b & 0x0f) : (b & 0x07);
  for (size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (byte(i + k) & 0x3f);
  }
  static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return n;
}

// JSON needs valid UTF-8; invalid bytes (possible in byte-level vocabularies) become
// U+FFFD, which the Python test never produces.
void json_string(std::string& out, std::string_view s) {
  out += '"';
  for (size_t i = 0; i < s.size();) {
    char c = s[i];
    size_t n = utf8_sequence(s, i);
    if (n == 0) {
      out += "\\ufffd";
      ++i;
      continue;
    }
    if (n > 1) {
      out.append(s.data() + i, n);
    } else if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<uint8_t>(c) < 0x20 || c == 0x7f) {
      out += fmt::format("\\u{:04x}", static_cast<uint8_t>(c));
    } else {
      out += c;
    }
    i += n;
  }
  out += '"';
}

void json_number(std::string& out, double d, bool is_f32) {
  if (std::isnan(d)) {
    out += "NaN";
  } else if (std::isinf(d)) {
    out += d > 0 ? "Infinity" : "-Infinity";
  } else if (is_f32) {
    out += fmt::format("{}", static_cast<float>(d));  // shortest text that reads back exactly
  } else {
    out += fmt::format("{}", d);
  }
}

void json_value(std::string& out, const GgufValue& v) {
  if (const GgufArray* a = v.as_array()) {
    out += "{\"elem_type\": \"";
    out += gguf_type_name(a->elem_type);
    out += "\", \"values\": [";
    for (size_t i = 0; i < a->values.size(); ++i) {
      if (i > 0) out += ", ";
      json_value(out, a->values[i]);
    }
    out += "]}";
  } else if (const std::string* s = v.as_string()) {
    json_string(out, *s);
  } else if (const bool* b = std::get_if<bool>(&v.v)) {
    out += *b ? "true" : "false";
  } else if (const uint64_t* u = std::get_if<uint64_t>(&v.v)) {
    out += fmt::format("{}", *u);
  } else if (const int64_t* i = std::get_if<int64_t>(&v.v)) {
    out += fmt::format("{}", *i);
  } else if (const double* d = std::get_if<double>(&v.v)) {
    json_number(out, *d, v.type == GgufType::FLOAT32);
  } else {
    out += "null";
  }
}

uint64_t fnv1a64(const uint8_t* p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

int dump(const std::string& path) {
  auto f = GgufFile::open(path);
  if (!f) {
    std::fprintf(stderr, "error: %s\n", f.status().message().c_str());
    return 1;
  }
  std::string out = "{\"path\": ";
  json_string(out, f->path());
  out += fmt::format(", \"version\": {}, \"alignment\": {}, \"data_offset\": {}, \"file_size\": {}",
                     f->version(), f->alignment(), f->data_offset(), f->file_size());
  out += ",\n \"metadata\": [";
  for (size_t i = 0; i < f->metadata().size(); ++i) {
    const auto& [key, value] = f->metadata()[i];
    out += i > 0 ? ",\n  {\"key\": " : "\n  {\"key\": ";
    json_string(out, key);
    out += fmt::format(", \"type\": \"{}\", \"value\": ", gguf_type_name(value.type));
    json_value(out, value);
    out += '}';
  }
  out += "],\n \"tensors\": [";
  for (size_t i = 0; i < f->tensors().size(); ++i) {
    const GgufTensor& t = f->tensors()[i];
    out += i > 0 ? ",\n  {\"name\": " : "\n  {\"name\": ";
    json_string(out, t.name);
    out += fmt::format(
        ", \"type\": \"{}\", \"type_id\": {}, \"shape\": [{}], \"offset\": {}, \"nbytes\": {}, "
        "\"fnv1a64\": \"{:016x}\"}}",
        dtype_name(t.type), static_cast<uint32_t>(t.type), fmt::join(t.shape, ", "), t.offset,
        t.nbytes, fnv1a64(t.data, t.nbytes));
  }
  out += "]}\n";
  std::fwrite(out.data(), 1, out.size(), stdout);
  return std::fflush(stdout) == 0 ? 0 : 1;
}

int copy(const std::string& in, const std::string& out) {
  auto f = GgufFile::open(in);
  if (!f) {
    std::fprintf(stderr, "error: %s\n", f.status().message().c_str());
    return 1;
  }
  GgufWriter w(f->alignment());
  for (const auto& [key, value] : f->metadata()) w.set(key, value);
  for (const GgufTensor& t : f->tensors())
    w.add_tensor(t.name, t.shape, t.type,
                 [&t](uint8_t* dst) { std::memcpy(dst, t.data, t.nbytes); });
  Status st = w.write(out);
  if (!st) {
    std::fprintf(stderr, "error: %s\n", st.message().c_str());
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace pagoda

int main(int argc, char** argv) {
  std::string_view cmd = argc > 1 ? argv[1] : "";
  if (cmd == "dump" && argc == 3) return pagoda::dump(argv[2]);
  if (cmd == "copy" && argc == 4) return pagoda::copy(argv[2], argv[3]);
  std::fprintf(stderr,
               "usage: pagoda-gguf-tool dump FILE\n"
               "       pagoda-gguf-tool copy IN OUT\n");
  return 2;
}

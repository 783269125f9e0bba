// pagoda-quant-tool: raw access to the format arithmetic for the Python oracle tests
// (tests/quant/test_quant_vs_gguf.py), which compare it with gguf-py's numpy code.
//
//   pagoda-quant-tool dequant TYPE N   < row bytes        > N float32
//   pagoda-quant-tool quant   TYPE N   < N float32        > row bytes
//   pagoda-quant-tool dot     TYPE N   < row bytes of TYPE, then N float32 activations
//                                      > "<dot> <dot of dequantized rows>\n"
//   pagoda-quant-tool info    TYPE     > "<block_size> <type_size> <vec_dot_type>\n"
//
// `dot` quantizes the activations to vec_dot_type(TYPE) as the matmul kernels do and
// prints both vec_dot and a double-precision dot of the two dequantized rows. Bytes are
// raw little-endian, as in a GGUF file. Exit status 2 on bad usage or short input.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "quant/formats.h"

namespace {

using pagoda::DType;

int fail(const std::string& msg) {
  std::fprintf(stderr, "pagoda-quant-tool: %s\n", msg.c_str());
  return 2;
}

bool read_exact(void* dst, size_t bytes) { return std::fread(dst, 1, bytes, stdin) == bytes; }

bool write_all(const void* src, size_t bytes) { return std::fwrite(src, 1, bytes, stdout) == bytes; }

// Float buffers padded so every block struct is suitably aligned.
std::vector<float> floats(size_t count) { return std::vector<float>(count); }
std::vector<float> bytes_as_floats(size_t bytes) { return std::vector<float>((bytes + 3) / 4 + 1); }

int run(int argc, char** argv) {
  if (argc < 3) {
    return fail("usage: pagoda-quant-tool {dequant|quant|dot} TYPE N, or info TYPE");
  }
  const std::string_view cmd = argv[1];
  const auto type = pagoda::dtype_from_name(argv[2]);
  if (!type) return fail(std::string("unknown type ") + argv[2]);
  const auto& info = pagoda::dtype_info(*type);
  if (cmd == "info") {
    std::printf("%lld %lld %s\n", static_cast<long long>(info.block_size),
                static_cast<long long>(info.type_size),
                std::string(pagoda::dtype_name(pagoda::vec_dot_type(*type))).c_str());
    return 0;
  }
  if (argc < 4) return fail("missing N");
  char* end = nullptr;
  const long long n = std::strtoll(argv[3], &end, 10);
  if (end == argv[3] || *end != '\0' || n < 0) return fail(std::string("bad N ") + argv[3]);
  if (n % info.block_size != 0) {
    return fail("N=" + std::to_string(n) + " is not a multiple of the " + std::string(info.name) +
                " block size " + std::to_string(info.block_size));
  }
  const size_t count = static_cast<size_t>(n);
  const size_t row = pagoda::row_bytes(*type, n);

  if (cmd == "dequant") {
    if (!pagoda::can_dequantize(*type)) return fail(std::string("cannot dequantize ") + argv[2]);
    auto src = bytes_as_floats(row);
    if (!read_exact(src.data(), row)) return fail("short input");
    auto dst = floats(count);
    pagoda::dequantize_row(*type, src.data(), dst.data(), n);
    return write_all(dst.data(), count * sizeof(float)) ? 0 : fail("write failed");
  }
  if (cmd == "quant") {
    if (!pagoda::can_quantize(*type)) return fail(std::string("cannot quantize to ") + argv[2]);
    auto src = floats(count);
    if (!read_exact(src.data(), count * sizeof(float))) return fail("short input");
    auto dst = bytes_as_floats(row);
    pagoda::quantize_row(*type, src.data(), dst.data(), n);
    return write_all(dst.data(), row) ? 0 : fail("write failed");
  }
  if (cmd == "dot") {
    if (!pagoda::can_dequantize(*type)) return fail(std::string("no dot for ") + argv[2]);
    const DType xt = pagoda::vec_dot_type(*type);
    auto w = bytes_as_floats(row);
    auto x = floats(count);
    if (!read_exact(w.data(), row) || !read_exact(x.data(), count * sizeof(float)))
      return fail("short input");
    auto xq = bytes_as_floats(pagoda::row_bytes(xt, n));
    pagoda::quantize_row(xt, x.data(), xq.data(), n);
    const float dot = pagoda::vec_dot(*type, n, w.data(), xq.data());
    auto wf = floats(count);
    auto xf = floats(count);
    pagoda::dequantize_row(*type, w.data(), wf.data(), n);
    pagoda::dequantize_row(xt, xq.data(), xf.data(), n);
    double ref = 0.0;
    for (size_t i = 0; i < count; ++i) ref += static_cast<double>(wf[i]) * xf[i];
    std::printf("%.9g %.17g\n", static_cast<double>(dot), ref);
    return 0;
  }
  return fail("unknown command " + std::string(cmd));
}

}  // namespace

int main(int argc, char** argv) { return run(argc, argv); }

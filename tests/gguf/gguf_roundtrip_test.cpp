// Writer -> reader round trips: every metadata type, arrays of strings, nested arrays,
// tensors of several types and shapes, alignment, and the accessors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numeric>

#include "gguf/gguf_file.h"
#include "gguf/gguf_test_util.h"
#include "gguf/gguf_writer.h"

namespace pagoda {
namespace {

using namespace pagoda::test;  // NOLINT

// Every value type, at the edges of its range where it has one.
std::vector<std::pair<std::string, GgufValue>> every_value() {
  using T = GgufType;
  std::vector<std::pair<std::string, GgufValue>> kv = {
      {"t.u8", uval(T::UINT8, 255)},
      {"t.i8", ival(T::INT8, -128)},
      {"t.u16", uval(T::UINT16, 65535)},
      {"t.i16", ival(T::INT16, -32768)},
      {"t.u32", uval(T::UINT32, 4294967295u)},
      {"t.i32", ival(T::INT32, std::numeric_limits<int32_t>::min())},
      {"t.f32", fval(T::FLOAT32, 0.1f)},
      {"t.bool.true", bval(true)},
      {"t.bool.false", bval(false)},
      {"t.string", sval("h\xc3\xa9llo \"world\"\n\t\\")},
      {"t.string.empty", sval("")},
      {"t.u64", uval(T::UINT64, std::numeric_limits<uint64_t>::max())},
      {"t.i64", ival(T::INT64, std::numeric_limits<int64_t>::min())},
      {"t.f64", fval(T::FLOAT64, -1.0e300)},
      {"t.f32.inf", fval(T::FLOAT32, INFINITY)},
      {"t.f64.nan", fval(T::FLOAT64, std::nan(""))},
      {"t.arr.u8", aval(T::UINT8, {uval(T::UINT8, 0), uval(T::UINT8, 7), uval(T::UINT8, 255)})},
      {"t.arr.i8", aval(T::INT8, {ival(T::INT8, -1), ival(T::INT8, 127)})},
      {"t.arr.u16", aval(T::UINT16, {uval(T::UINT16, 1)})},
      {"t.arr.i16", aval(T::INT16, {ival(T::INT16, -2), ival(T::INT16, 3)})},
      {"t.arr.u32", aval(T::UINT32, {uval(T::UINT32, 5), uval(T::UINT32, 6)})},
      {"t.arr.i32", aval(T::INT32, {ival(T::INT32, -7)})},
      {"t.arr.f32", aval(T::FLOAT32, {fval(T::FLOAT32, 1.5), fval(T::FLOAT32, -0.0)})},
      {"t.arr.bool", aval(T::BOOL, {bval(true), bval(false), bval(true)})},
      {"t.arr.string", aval(T::STRING, {sval("a"), sval(""), sval("\xe2\x96\x81the")})},
      {"t.arr.u64", aval(T::UINT64, {uval(T::UINT64, 1ull << 63)})},
      {"t.arr.i64", aval(T::INT64, {ival(T::INT64, -(1ll << 62))})},
      {"t.arr.f64", aval(T::FLOAT64, {fval(T::FLOAT64, 3.141592653589793)})},
      {"t.arr.empty", aval(T::INT32, {})},
      {"t.arr.nested", aval(T::ARRAY, {aval(T::STRING, {sval("x"), sval("yz")}),
                                       aval(T::STRING, {}), aval(T::STRING, {sval("w")})})},
      {"t.arr.nested3",
       aval(T::ARRAY, {aval(T::ARRAY, {aval(T::INT16, {ival(T::INT16, 1), ival(T::INT16, 2)}),
                                       aval(T::INT16, {ival(T::INT16, 3)})}),
                       aval(T::ARRAY, {})})},
  };
  return kv;
}

struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;
  DType type;
};

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<uint8_t>(seed + i * 131 + (i >> 8));
  return out;
}

size_t nbytes_of(const TensorSpec& t) {
  int64_t rows =
      std::accumulate(t.shape.begin() + 1, t.shape.end(), int64_t{1}, std::multiplies<>());
  return row_bytes(t.type, t.shape[0]) * static_cast<size_t>(rows);
}

const std::vector<TensorSpec>& tensor_specs() {
  static const std::vector<TensorSpec> specs = {
      {"token_embd.weight", {8, 5}, DType::F32},
      {"blk.0.attn_norm.weight", {7}, DType::F16},
      {"blk.0.attn_q.weight", {64, 3}, DType::Q8_0},
      {"blk.0.ffn_up.weight", {256, 2}, DType::Q4_K},
      {"blk.0.ffn_down.weight", {512, 1, 2}, DType::Q6_K},
      {"blk.0.scale", {3, 1, 2, 2}, DType::BF16},
      {"blk.0.ids", {2, 2, 2, 2}, DType::I32},
      {"blk.0.q40", {32}, DType::Q4_0},
      {"blk.0.i8", {5, 3}, DType::I8},
      {"blk.0.f64", {3}, DType::F64},
  };
  return specs;
}

void write_sample(const std::string& path, uint64_t alignment) {
  GgufWriter w(alignment);
  for (auto& [k, v] : every_value()) w.set(k, v);
  uint8_t seed = 1;
  for (const TensorSpec& t : tensor_specs()) {
    auto bytes = pattern(nbytes_of(t), seed++);
    if (seed % 2 == 0) {
      w.add_tensor_bytes(t.name, t.shape, t.type, bytes.data(), bytes.size());
    } else {
      w.add_tensor(t.name, t.shape, t.type,
                   [bytes](uint8_t* dst) { std::memcpy(dst, bytes.data(), bytes.size()); });
    }
  }
  Status st = w.write(path);
  ASSERT_TRUE(st.is_ok()) << st.message();
}

class RoundTrip : public ::testing::TestWithParam<uint64_t> {};

TEST_P(RoundTrip, EveryValueTypeAndTensor) {
  ScratchDir dir;
  const std::string path = dir.path("sample.gguf");
  const uint64_t alignment = GetParam();
  write_sample(path, alignment);

  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->alignment(), alignment);
  EXPECT_EQ(f->path(), path);
  EXPECT_EQ(f->data_offset() % alignment, 0u);

  // Metadata in order, plus general.alignment appended when it is not the default.
  auto expected = every_value();
  const auto& got = f->metadata();
  ASSERT_EQ(got.size(), expected.size() + (alignment != 32 ? 1 : 0));
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(got[i].first, expected[i].first);
    EXPECT_TRUE(same_value(got[i].second, expected[i].second)) << got[i].first;
  }
  if (alignment != 32) {
    EXPECT_EQ(got.back().first, "general.alignment");
    EXPECT_EQ(f->get_int("general.alignment"), static_cast<int64_t>(alignment));
  }

  // Tensors: shape, type, layout, and the bytes, which must live in the mapping.
  const auto& specs = tensor_specs();
  ASSERT_EQ(f->tensors().size(), specs.size());
  uint8_t seed = 1;
  uint64_t expected_offset = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    const GgufTensor& t = f->tensors()[i];
    SCOPED_TRACE(t.name);
    EXPECT_EQ(t.name, specs[i].name);
    EXPECT_EQ(t.shape, specs[i].shape);
    EXPECT_EQ(t.type, specs[i].type);
    EXPECT_EQ(t.nbytes, nbytes_of(specs[i]));
    EXPECT_EQ(t.offset, expected_offset);
    EXPECT_EQ(t.offset % alignment, 0u);
    ASSERT_NE(t.data, nullptr);
    // In place in the mapping (every tensor at the same base + its offset), unless the
    // file's alignment left it below its block's: then an aligned copy.
    const GgufTensor& first = f->tensors()[0];
    const uint64_t at = f->data_offset() + t.offset;
    EXPECT_EQ(t.realigned, at % block_alignment(dtype_info(t.type)) != 0);
    if (!t.realigned && !first.realigned) {
      EXPECT_EQ(t.data - t.offset, first.data - first.offset);
    }
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data) % block_alignment(dtype_info(t.type)), 0u);
    auto bytes = pattern(t.nbytes, seed++);
    EXPECT_EQ(std::memcmp(t.data, bytes.data(), bytes.size()), 0);
    EXPECT_EQ(f->find_tensor(t.name), &t);
    int64_t n = std::accumulate(t.shape.begin(), t.shape.end(), int64_t{1}, std::multiplies<>());
    EXPECT_EQ(t.num_elements(), n);
    expected_offset += (t.nbytes + alignment - 1) / alignment * alignment;
  }
  EXPECT_EQ(f->find_tensor("missing"), nullptr);
  // Padded after the last tensor too, as gguf-py and llama.cpp do.
  EXPECT_EQ(f->file_size(), f->data_offset() + expected_offset);
}

INSTANTIATE_TEST_SUITE_P(Alignments, RoundTrip, ::testing::Values(32, 1, 64, 4096));

TEST(GgufAccessors, TypedGetters) {
  ScratchDir dir;
  const std::string path = dir.path("acc.gguf");
  write_sample(path, 32);
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.is_ok()) << f.status().message();

  EXPECT_EQ(f->get_int("t.u8"), 255);
  EXPECT_EQ(f->get_int("t.i64"), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(f->get_int("t.u64"), std::nullopt);  // does not fit in int64
  EXPECT_EQ(f->get_int("t.bool.true"), 1);
  EXPECT_EQ(f->get_int("t.string"), std::nullopt);
  EXPECT_EQ(f->get_int("missing"), std::nullopt);
  EXPECT_FLOAT_EQ(static_cast<float>(*f->get_float("t.f32")), 0.1f);
  EXPECT_EQ(f->get_float("t.i16"), -32768.0);
  EXPECT_EQ(f->get_float("t.string"), std::nullopt);
  EXPECT_EQ(f->get_string("t.string"), "h\xc3\xa9llo \"world\"\n\t\\");
  EXPECT_EQ(f->get_string("t.u8"), std::nullopt);
  EXPECT_EQ(f->get_bool("t.bool.false"), false);
  EXPECT_EQ(f->get_bool("t.u8"), std::nullopt);
  ASSERT_NE(f->get_array("t.arr.string"), nullptr);
  EXPECT_EQ(f->get_array("t.arr.string")->elem_type, GgufType::STRING);
  EXPECT_EQ(*f->get_array("t.arr.string")->values[2].as_string(), "\xe2\x96\x81the");
  EXPECT_EQ(f->get_array("t.u8"), nullptr);
  const GgufArray* nested = f->get_array("t.arr.nested");
  ASSERT_NE(nested, nullptr);
  EXPECT_EQ(nested->elem_type, GgufType::ARRAY);
  ASSERT_EQ(nested->values.size(), 3u);
  EXPECT_EQ(*nested->values[0].as_array()->values[1].as_string(), "yz");
  EXPECT_TRUE(nested->values[1].as_array()->values.empty());
}

TEST(GgufAccessors, ConvenienceSetters) {
  ScratchDir dir;
  const std::string path = dir.path("set.gguf");
  GgufWriter w;
  w.set_u32("a.u32", 7);
  w.set_i32("a.i32", -7);
  w.set_f32("a.f32", 2.5f);
  w.set_bool("a.bool", true);
  w.set_string("a.str", "s");
  w.set_string_array("a.strs", {"x", "y"});
  w.set_f32_array("a.f32s", {1.0f, -2.0f});
  w.set_i32_array("a.i32s", {3, -4});
  w.set_u32("a.u32", 8);  // replaces, keeping the first position
  ASSERT_TRUE(w.write(path).is_ok());
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  ASSERT_EQ(f->metadata().size(), 8u);
  EXPECT_EQ(f->metadata()[0].first, "a.u32");
  EXPECT_EQ(f->metadata()[0].second.type, GgufType::UINT32);
  EXPECT_EQ(f->get_int("a.u32"), 8);
  EXPECT_EQ(f->find("a.i32")->type, GgufType::INT32);
  EXPECT_EQ(f->get_float("a.f32"), 2.5);
  EXPECT_EQ(f->get_bool("a.bool"), true);
  EXPECT_EQ(f->get_string("a.str"), "s");
  EXPECT_EQ(f->get_array("a.strs")->values.size(), 2u);
  EXPECT_EQ(f->get_array("a.f32s")->elem_type, GgufType::FLOAT32);
  EXPECT_EQ(f->get_array("a.i32s")->values[1].as_int(), -4);
  EXPECT_TRUE(f->tensors().empty());
}

TEST(GgufVersions, ReadsVersion2) {
  // v2 and v3 share the layout (v3 only added big-endian files), so a v3 file with its
  // version patched is a valid v2 file.
  ScratchDir dir;
  const std::string path = dir.path("v2.gguf");
  write_sample(path, 32);
  auto bytes = read_bytes(path);
  put<uint32_t>(bytes, 4, 2);
  write_bytes(path, bytes);
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  EXPECT_EQ(f->version(), 2u);
  EXPECT_EQ(f->tensors().size(), tensor_specs().size());
}

TEST(GgufCopy, ReaderToWriterIsByteIdentical) {
  // What `pagoda-gguf-tool copy` does: our own output copied again must not change.
  ScratchDir dir;
  const std::string a = dir.path("a.gguf"), b = dir.path("b.gguf");
  write_sample(a, 64);
  auto f = GgufFile::open(a);
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  GgufWriter w(f->alignment());
  for (const auto& [k, v] : f->metadata()) w.set(k, v);
  for (const GgufTensor& t : f->tensors())
    w.add_tensor(t.name, t.shape, t.type,
                 [&t](uint8_t* dst) { std::memcpy(dst, t.data, t.nbytes); });
  ASSERT_TRUE(w.write(b).is_ok());
  EXPECT_EQ(read_bytes(a), read_bytes(b));
}

}  // namespace
}  // namespace pagoda

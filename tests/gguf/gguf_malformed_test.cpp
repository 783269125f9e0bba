// Every kind of malformed file the reader must refuse. Each starts from a good file
// written by GgufWriter, corrupted or truncated in place; each error must name the file
// and the field.
#include <gtest/gtest.h>

#include <chrono>
#include <initializer_list>

#include "gguf/gguf_file.h"
#include "gguf/gguf_test_util.h"
#include "gguf/gguf_writer.h"

namespace pagoda {
namespace {

using namespace pagoda::test;  // NOLINT

// Keys and tensor names come in pairs of equal length so one can be renamed to the
// other in place.
void write_good(const std::string& path, uint64_t alignment) {
  GgufWriter w(alignment);
  w.set_string("general.architecture", "llama");
  w.set_u32("test.count", 7);
  w.set_string_array("test.strings", {"alpha", "beta"});
  w.set_bool("test.other", true);
  w.set("test.nested", aval(GgufType::ARRAY, {aval(GgufType::UINT8, {uval(GgufType::UINT8, 1)})}));
  std::vector<uint8_t> q8(68, 0x11), f32(48, 0x22);
  w.add_tensor_bytes("tensor.one", {32, 2}, DType::Q8_0, q8.data(), q8.size());
  w.add_tensor_bytes("tensor.two", {4, 3}, DType::F32, f32.data(), f32.size());
  Status st = w.write(path);
  ASSERT_TRUE(st.is_ok()) << st.message();
}

class Malformed : public ::testing::Test {
 protected:
  void SetUp() override { load(32); }
  void load(uint64_t alignment) {
    write_good(path_, alignment);
    bytes_ = read_bytes(path_);
    auto f = GgufFile::open(path_);
    ASSERT_TRUE(f.is_ok()) << f.status().message();
  }

  // Writes bytes_ and expects open() to fail with a message naming the file and
  // containing every one of `parts`.
  void expect_failure(std::initializer_list<std::string_view> parts) {
    write_bytes(path_, bytes_);
    // (No time bound: a loop over a bogus count would hang, which ctest's timeout
    // catches; a wall-clock assertion would only measure the machine's load.)
    auto f = GgufFile::open(path_);
    ASSERT_FALSE(f.is_ok()) << "a corrupt file opened";
    const std::string& msg = f.status().message();
    EXPECT_EQ(msg.rfind(path_ + ": ", 0), 0u) << msg;
    for (std::string_view part : parts)
      EXPECT_NE(msg.find(part), std::string::npos) << "no '" << part << "' in: " << msg;
  }

  // Field offsets, found through the names that precede them.
  size_t value_of(std::string_view key) { return after(bytes_, key) + 4; }  // past the type
  size_t dims_of(std::string_view tensor) { return after(bytes_, tensor) + 4; }
  size_t type_of(std::string_view tensor) {
    return dims_of(tensor) + 8 * get<uint32_t>(bytes_, after(bytes_, tensor));
  }
  size_t offset_of(std::string_view tensor) { return type_of(tensor) + 4; }

  ScratchDir dir_;
  std::string path_ = dir_.path("bad.gguf");
  std::vector<uint8_t> bytes_;
};

TEST_F(Malformed, TruncatedAnywhere) {
  auto good = GgufFile::open(path_);
  ASSERT_TRUE(good.is_ok());
  const GgufTensor& last = good->tensors().back();
  const size_t data_end = good->data_offset() + last.offset + last.nbytes;
  const auto full = bytes_;
  for (size_t len = 0; len < data_end; ++len) {
    SCOPED_TRACE(len);
    bytes_.assign(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(len));
    write_bytes(path_, bytes_);
    auto f = GgufFile::open(path_);
    ASSERT_FALSE(f.is_ok());
    const std::string& msg = f.status().message();
    EXPECT_EQ(msg.rfind(path_ + ": ", 0), 0u) << msg;
    EXPECT_TRUE(msg.find("truncated") != std::string::npos ||
                msg.find("past the end") != std::string::npos ||
                msg.find("cannot fit") != std::string::npos ||
                msg.find("impossible") != std::string::npos)
        << msg;
  }
  // Cutting only the padding after the last tensor loses nothing.
  bytes_.assign(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(data_end));
  write_bytes(path_, bytes_);
  EXPECT_TRUE(GgufFile::open(path_).is_ok());
}

TEST_F(Malformed, EmptyFile) {
  bytes_.clear();
  expect_failure({"header magic", "truncated"});
}

TEST_F(Malformed, MissingFile) {
  auto f = GgufFile::open(dir_.path("nope.gguf"));
  ASSERT_FALSE(f.is_ok());
  EXPECT_NE(f.status().message().find(dir_.path("nope.gguf")), std::string::npos);
}

TEST_F(Malformed, BadMagic) {
  bytes_[0] = 'X';
  expect_failure({"header magic", "58 47 55 46", "not a GGUF file"});
}

TEST_F(Malformed, Version1) {
  put<uint32_t>(bytes_, 4, 1);
  expect_failure({"header version", "version 1 is not supported"});
}

TEST_F(Malformed, UnknownVersion) {
  put<uint32_t>(bytes_, 4, 4);
  expect_failure({"header version", "unsupported GGUF version 4"});
}

TEST_F(Malformed, BigEndian) {
  put<uint32_t>(bytes_, 4, 0x03000000);
  expect_failure({"header version", "big-endian", "version 3"});
}

TEST_F(Malformed, AbsurdTensorCount) {
  put<uint64_t>(bytes_, 8, uint64_t{1} << 60);
  expect_failure({"header tensor_count", "1152921504606846976", "cannot fit"});
}

TEST_F(Malformed, AbsurdKvCount) {
  put<uint64_t>(bytes_, 16, uint64_t{1} << 60);
  expect_failure({"header metadata_kv_count", "1152921504606846976", "cannot fit"});
}

TEST_F(Malformed, KeyLengthPastEnd) {
  put<uint64_t>(bytes_, 24, uint64_t{1} << 60);
  expect_failure({"metadata #0 key", "length 1152921504606846976", "past the end"});
}

TEST_F(Malformed, EmptyKey) {
  put<uint64_t>(bytes_, 24, 0);
  expect_failure({"metadata #0 key", "empty"});
}

TEST_F(Malformed, UnknownValueType) {
  put<uint32_t>(bytes_, after(bytes_, "test.count"), 13);
  expect_failure({"metadata 'test.count' type", "unknown value type 13"});
}

TEST_F(Malformed, UnknownArrayElementType) {
  put<uint32_t>(bytes_, value_of("test.strings"), 99);
  expect_failure({"metadata 'test.strings'", "unknown array element type 99"});
}

TEST_F(Malformed, AbsurdArrayCount) {
  put<uint64_t>(bytes_, value_of("test.strings") + 4, uint64_t{1} << 60);
  expect_failure({"metadata 'test.strings'", "array count 1152921504606846976", "impossible"});
}

TEST_F(Malformed, ArrayCountPastEnd) {
  // Plausible per element, yet more strings than the file holds.
  put<uint64_t>(bytes_, value_of("test.strings") + 4, 1000);
  expect_failure({"metadata 'test.strings'"});
}

TEST_F(Malformed, ArrayCountWithinFileSizeButAbsurd) {
  // 2^24 + 1 one-byte elements fit in this 36 MiB file, so only the limit on metadata
  // values stops the reader from decoding the tensor data as 16M array elements.
  GgufWriter w;
  w.set("test.bytes", aval(GgufType::UINT8, {uval(GgufType::UINT8, 1)}));
  const size_t nbytes = size_t{36} << 20;
  w.add_tensor("big", {static_cast<int64_t>(nbytes / 4)}, DType::F32,
               [nbytes](uint8_t* dst) { std::memset(dst, 0, nbytes); });
  ASSERT_TRUE(w.write(path_).is_ok());
  bytes_ = read_bytes(path_);
  put<uint64_t>(bytes_, value_of("test.bytes") + 4, (uint64_t{1} << 24) + 1);
  expect_failure({"metadata 'test.bytes'", "array count 16777217", "16777216 metadata values"});
}

TEST_F(Malformed, StringLengthPastEnd) {
  put<uint64_t>(bytes_, value_of("test.strings") + 12, uint64_t{1} << 40);
  expect_failure(
      {"metadata 'test.strings'", "element 0", "string length 1099511627776", "past the end"});
}

TEST_F(Malformed, NestedArrayElementCorrupt) {
  // test.nested is ARRAY of ARRAY: outer type, count, then the inner type.
  put<uint32_t>(bytes_, value_of("test.nested") + 12, 77);
  expect_failure({"metadata 'test.nested'", "element 0", "unknown array element type 77"});
}

TEST_F(Malformed, BoolNotZeroOrOne) {
  put<uint8_t>(bytes_, value_of("test.other"), 2);
  expect_failure({"metadata 'test.other'", "BOOL value 2", "neither 0 nor 1"});
}

TEST_F(Malformed, DuplicateKey) {
  size_t at = after(bytes_, "test.other") - 10;
  std::memcpy(bytes_.data() + at, "test.count", 10);
  expect_failure({"metadata 'test.count'", "duplicate key"});
}

TEST_F(Malformed, DuplicateTensorName) {
  size_t at = after(bytes_, "tensor.two") - 10;
  std::memcpy(bytes_.data() + at, "tensor.one", 10);
  expect_failure({"tensor 'tensor.one'", "duplicate tensor name"});
}

TEST_F(Malformed, EmptyTensorName) {
  size_t at = after(bytes_, "tensor.one") - 10 - 8;
  put<uint64_t>(bytes_, at, 0);
  expect_failure({"tensor #0 name", "empty"});
}

TEST_F(Malformed, UnknownTensorType) {
  put<uint32_t>(bytes_, type_of("tensor.two"), 99);
  expect_failure({"tensor 'tensor.two' type", "unknown tensor type id 99"});
}

TEST_F(Malformed, TooManyDims) {
  put<uint32_t>(bytes_, after(bytes_, "tensor.two"), 5);
  expect_failure({"tensor 'tensor.two' n_dims", "5 dimensions"});
}

TEST_F(Malformed, AbsurdDims) {
  put<uint32_t>(bytes_, after(bytes_, "tensor.two"), 0x80000000u);
  expect_failure({"tensor 'tensor.two' n_dims", "2147483648 dimensions"});
}

TEST_F(Malformed, ZeroDims) {
  put<uint32_t>(bytes_, after(bytes_, "tensor.two"), 0);
  expect_failure({"tensor 'tensor.two' n_dims", "0 dimensions"});
}

TEST_F(Malformed, ZeroSizeDimension) {
  put<uint64_t>(bytes_, dims_of("tensor.two") + 8, 0);
  expect_failure({"tensor 'tensor.two' dimension 1", "is 0"});
}

TEST_F(Malformed, DimensionBeyondInt64) {
  put<uint64_t>(bytes_, dims_of("tensor.two"), uint64_t{1} << 63);
  expect_failure({"tensor 'tensor.two' dimension 0", "does not fit"});
}

TEST_F(Malformed, ElementCountOverflow) {
  put<uint64_t>(bytes_, dims_of("tensor.two"), uint64_t{1} << 40);
  put<uint64_t>(bytes_, dims_of("tensor.two") + 8, uint64_t{1} << 40);
  expect_failure({"tensor 'tensor.two' shape", "element count", "overflows"});
}

TEST_F(Malformed, ByteSizeOverflow) {
  // 2^61 F32 values fit in int64, their 2^63 bytes do not.
  put<uint64_t>(bytes_, dims_of("tensor.two"), uint64_t{1} << 61);
  put<uint64_t>(bytes_, dims_of("tensor.two") + 8, 1);
  expect_failure({"tensor 'tensor.two' shape", "byte size", "overflows"});
}

TEST_F(Malformed, RowNotMultipleOfBlock) {
  put<uint64_t>(bytes_, dims_of("tensor.one"), 33);
  expect_failure({"tensor 'tensor.one' shape", "row length 33", "Q8_0 block size 32"});
}

TEST_F(Malformed, DataPastEnd) {
  put<uint64_t>(bytes_, offset_of("tensor.two"), uint64_t{1} << 20);
  expect_failure({"tensor 'tensor.two' data", "past the end"});
}

TEST_F(Malformed, DataOffsetWraps) {
  put<uint64_t>(bytes_, offset_of("tensor.two"), ~uint64_t{31});
  expect_failure({"tensor 'tensor.two' data", "past the end"});
}

TEST_F(Malformed, MisalignedOffset) {
  put<uint64_t>(bytes_, offset_of("tensor.two"),
                get<uint64_t>(bytes_, offset_of("tensor.two")) + 4);
  expect_failure({"tensor 'tensor.two' offset", "not a multiple of general.alignment (32)"});
}

TEST_F(Malformed, OverlappingTensors) {
  put<uint64_t>(bytes_, offset_of("tensor.two"), 64);  // inside tensor.one's 68 bytes
  expect_failure({"tensor 'tensor.two' offset", "overlaps tensor 'tensor.one'"});
}

TEST_F(Malformed, AlignmentNotPowerOfTwo) {
  load(64);
  put<uint32_t>(bytes_, value_of("general.alignment"), 48);
  expect_failure({"general.alignment", "48 is not a power of two"});
}

TEST_F(Malformed, AlignmentZero) {
  load(64);
  put<uint32_t>(bytes_, value_of("general.alignment"), 0);
  expect_failure({"general.alignment", "0 is not a power of two"});
}

TEST_F(Malformed, AlignmentWrongType) {
  load(64);
  put<uint32_t>(bytes_, after(bytes_, "general.alignment"), static_cast<uint32_t>(GgufType::INT32));
  expect_failure({"general.alignment", "has type INT32", "must be UINT32"});
}

TEST_F(Malformed, AlignmentChangesLayout) {
  // A smaller alignment than the writer used: offsets stay aligned but the data section
  // starts elsewhere, so the file no longer describes its tensors; the open must not
  // crash either way.
  load(64);
  put<uint32_t>(bytes_, value_of("general.alignment"), 4096);
  expect_failure({"tensor 'tensor.one'"});
}

// A file with one key holding `levels` arrays nested in each other.
std::vector<uint8_t> nested_file(int levels) {
  std::vector<uint8_t> b;
  auto u32 = [&](uint32_t v) {
    b.insert(b.end(), reinterpret_cast<uint8_t*>(&v), reinterpret_cast<uint8_t*>(&v) + 4);
  };
  auto u64 = [&](uint64_t v) {
    b.insert(b.end(), reinterpret_cast<uint8_t*>(&v), reinterpret_cast<uint8_t*>(&v) + 8);
  };
  b.insert(b.end(), {'G', 'G', 'U', 'F'});
  u32(3);
  u64(0);  // tensors
  u64(1);  // kv
  u64(4);
  b.insert(b.end(), {'d', 'e', 'e', 'p'});
  u32(static_cast<uint32_t>(GgufType::ARRAY));
  for (int i = 1; i < levels; ++i) {
    u32(static_cast<uint32_t>(GgufType::ARRAY));
    u64(1);
  }
  u32(static_cast<uint32_t>(GgufType::UINT8));
  u64(0);
  return b;
}

TEST_F(Malformed, NestingLimit) {
  bytes_ = nested_file(16);
  write_bytes(path_, bytes_);
  auto ok = GgufFile::open(path_);
  ASSERT_TRUE(ok.is_ok()) << ok.status().message();
  const GgufValue* v = ok->find("deep");
  for (int i = 0; i < 15; ++i) {
    ASSERT_NE(v->as_array(), nullptr);
    v = &v->as_array()->values.at(0);
  }
  EXPECT_EQ(v->as_array()->elem_type, GgufType::UINT8);

  bytes_ = nested_file(17);
  expect_failure({"metadata 'deep'", "nested more than 16 deep"});
  // Deep enough to overflow the stack if the reader recursed without a limit.
  bytes_ = nested_file(1 << 20);
  expect_failure({"metadata 'deep'", "nested more than 16 deep"});
}

}  // namespace
}  // namespace pagoda

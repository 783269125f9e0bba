// The writer's own contract: it refuses inconsistent input before creating anything, and
// a write that fails part way leaves neither a partial file nor a temporary behind.
#include "gguf/gguf_writer.h"

#include <gtest/gtest.h>

#include <stdexcept>

#include "gguf/gguf_file.h"
#include "gguf/gguf_test_util.h"

namespace pagoda {
namespace {

using namespace pagoda::test;  // NOLINT

// Expects write() to fail naming the path and containing `part`, with nothing left in
// the directory.
void expect_write_fails(const GgufWriter& w, const ScratchDir& dir, std::string_view part) {
  const std::string path = dir.path("out.gguf");
  Status st = w.write(path);
  ASSERT_FALSE(st.is_ok());
  EXPECT_EQ(st.message().rfind(path + ": ", 0), 0u) << st.message();
  EXPECT_NE(st.message().find(part), std::string::npos) << st.message();
  EXPECT_TRUE(dir.entries().empty()) << "left behind: " << dir.entries().front();
}

TEST(GgufWriter, RefusesBadShapes) {
  ScratchDir dir;
  std::vector<uint8_t> bytes(1024);
  auto fill = [](uint8_t*) {};
  {
    GgufWriter w;
    w.add_tensor("q", {33, 2}, DType::Q8_0, fill);
    expect_write_fails(w, dir,
                       "tensor 'q': row length 33 is not a multiple of the Q8_0 block size");
  }
  {
    GgufWriter w;
    w.add_tensor("z", {4, 0}, DType::F32, fill);
    expect_write_fails(w, dir, "tensor 'z': dimension 1 is 0");
  }
  {
    GgufWriter w;
    w.add_tensor("five", {1, 1, 1, 1, 1}, DType::F32, fill);
    expect_write_fails(w, dir, "tensor 'five': has 5 dimensions");
  }
  {
    GgufWriter w;
    w.add_tensor("none", {}, DType::F32, fill);
    expect_write_fails(w, dir, "tensor 'none': has 0 dimensions");
  }
  {
    GgufWriter w;
    w.add_tensor("big", {int64_t{1} << 40, int64_t{1} << 40}, DType::F32, fill);
    expect_write_fails(w, dir, "tensor 'big': element count overflows");
  }
  {
    GgufWriter w;
    w.add_tensor("odd", {4}, static_cast<DType>(99), fill);
    expect_write_fails(w, dir, "tensor 'odd': unknown tensor type id 99");
  }
  {
    GgufWriter w;
    w.add_tensor_bytes("short", {4, 4}, DType::F32, bytes.data(), 60);
    expect_write_fails(w, dir,
                       "tensor 'short': 60 bytes were given, but its shape and type need 64");
  }
  {
    GgufWriter w;
    w.add_tensor_bytes("dup", {4}, DType::F32, bytes.data(), 16);
    w.add_tensor_bytes("dup", {4}, DType::F32, bytes.data(), 16);
    expect_write_fails(w, dir, "tensor 'dup': added twice");
  }
  {
    GgufWriter w;
    w.add_tensor_bytes("", {4}, DType::F32, bytes.data(), 16);
    expect_write_fails(w, dir, "empty name");
  }
}

TEST(GgufWriter, RefusesInconsistentValues) {
  ScratchDir dir;
  using T = GgufType;
  struct Case {
    GgufValue value;
    std::string_view part;
  };
  std::vector<Case> cases = {
      {uval(T::UINT8, 256), "a UINT8 value holds 256, which does not fit"},
      {ival(T::INT8, -129), "a INT8 value holds -129, which does not fit"},
      {ival(T::UINT32, -1), "negative number -1"},
      {uval(T::INT64, ~uint64_t{0}), "does not fit"},
      {GgufValue{T::STRING, uint64_t{1}}, "a STRING value holds an unsigned integer"},
      {GgufValue{T::FLOAT32, true}, "a FLOAT32 value holds a bool"},
      {GgufValue{T::BOOL, std::string("yes")}, "a BOOL value holds a string"},
      {GgufValue{T::ARRAY, std::shared_ptr<GgufArray>()}, "null array"},
      {aval(T::INT32, {ival(T::INT32, 1), uval(T::UINT32, 2)}),
       "element 1 has type UINT32, but the array holds INT32"},
      {aval(T::ARRAY, {aval(T::UINT8, {uval(T::UINT8, 1000)})}), "element 0: element 0: a UINT8"},
      {GgufValue{static_cast<T>(42), uint64_t{1}}, "unknown value type 42"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.part);
    GgufWriter w;
    w.set("k.ok", uval(T::UINT8, 1));
    w.set("k.bad", c.value);
    expect_write_fails(w, dir, "metadata 'k.bad': ");
    expect_write_fails(w, dir, c.part);
  }
  GgufWriter w;
  w.set("", uval(T::UINT8, 1));
  expect_write_fails(w, dir, "metadata key is empty");
}

TEST(GgufWriter, RefusesTooDeepNesting) {
  ScratchDir dir;
  GgufValue v = aval(GgufType::UINT8, {});
  for (int i = 1; i < 17; ++i) v = aval(GgufType::ARRAY, {v});
  GgufWriter w;
  w.set("deep", v);
  expect_write_fails(w, dir, "nested more than 16 deep");
}

TEST(GgufWriter, RefusesBadAlignment) {
  ScratchDir dir;
  expect_write_fails(GgufWriter(48), dir, "alignment 48 is not a power of two");
  expect_write_fails(GgufWriter(0), dir, "alignment 0 is not a power of two");
  expect_write_fails(GgufWriter(uint64_t{1} << 33), dir, "fits in 32 bits");
}

TEST(GgufWriter, FailingFillLeavesNothing) {
  ScratchDir dir;
  std::vector<uint8_t> bytes(16);
  GgufWriter w;
  w.add_tensor_bytes("a", {4}, DType::F32, bytes.data(), bytes.size());
  w.add_tensor("b", {4}, DType::F32, [](uint8_t*) { throw std::runtime_error("disk on fire"); });
  expect_write_fails(w, dir, "tensor 'b': producing its data failed: disk on fire");
}

TEST(GgufWriter, FailedWriteKeepsTheOldFile) {
  ScratchDir dir;
  const std::string path = dir.path("model.gguf");
  write_bytes(path, {'o', 'l', 'd'});
  GgufWriter w;
  w.add_tensor("b", {4}, DType::F32, [](uint8_t*) { throw std::runtime_error("no"); });
  EXPECT_FALSE(w.write(path).is_ok());
  EXPECT_EQ(read_bytes(path), (std::vector<uint8_t>{'o', 'l', 'd'}));
  EXPECT_EQ(dir.entries().size(), 1u);

  GgufWriter good;
  good.set_u32("x", 1);
  ASSERT_TRUE(good.write(path).is_ok());
  EXPECT_TRUE(GgufFile::open(path).is_ok());
  EXPECT_EQ(dir.entries().size(), 1u);
}

TEST(GgufWriter, MissingDirectory) {
  ScratchDir dir;
  const std::string path = dir.path("no/such/dir/out.gguf");
  Status st = GgufWriter().write(path);
  ASSERT_FALSE(st.is_ok());
  EXPECT_EQ(st.message().rfind(path + ": cannot create", 0), 0u) << st.message();
}

TEST(GgufWriter, AlignmentKeyFollowsTheLayout) {
  // A caller-set general.alignment that disagrees with the writer would describe a
  // layout the file does not have; the writer's alignment wins, in the key's position.
  ScratchDir dir;
  const std::string path = dir.path("a.gguf");
  std::vector<uint8_t> bytes(16, 1);
  GgufWriter w(64);
  w.set_u32("general.alignment", 8);
  w.set_u32("after", 1);
  w.add_tensor_bytes("a", {4}, DType::F32, bytes.data(), bytes.size());
  w.add_tensor_bytes("b", {4}, DType::F32, bytes.data(), bytes.size());
  ASSERT_TRUE(w.write(path).is_ok());
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  EXPECT_EQ(f->alignment(), 64u);
  ASSERT_EQ(f->metadata().size(), 2u);
  EXPECT_EQ(f->metadata()[0].first, "general.alignment");
  EXPECT_EQ(f->get_int("general.alignment"), 64);
  EXPECT_EQ(f->tensors()[1].offset, 64u);
}

TEST(GgufWriter, DefaultAlignmentWritesNoKey) {
  ScratchDir dir;
  const std::string path = dir.path("a.gguf");
  GgufWriter w;
  w.set_u32("x", 1);
  ASSERT_TRUE(w.write(path).is_ok());
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.is_ok());
  EXPECT_EQ(f->find("general.alignment"), nullptr);
  EXPECT_EQ(f->alignment(), 32u);
}

}  // namespace
}  // namespace pagoda

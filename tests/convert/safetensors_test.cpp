// The safetensors reader on hand-built files: a well-formed file reads back its tensors,
// and every kind of damage (bad JSON, offsets past the end, sizes that disagree with the
// shape, unknown dtypes, overlaps, truncated headers) is an error naming the problem,
// never a crash or an out-of-bounds read.
#include "convert/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace pagoda {
namespace {

std::vector<uint8_t> make_file(const std::string& header, size_t data_bytes, uint64_t declared_len = UINT64_MAX) {
  const uint64_t len = declared_len == UINT64_MAX ? header.size() : declared_len;
  std::vector<uint8_t> f(8 + header.size() + data_bytes, 0);
  for (int i = 0; i < 8; ++i) f[static_cast<size_t>(i)] = static_cast<uint8_t>(len >> (8 * i));
  std::memcpy(f.data() + 8, header.data(), header.size());
  for (size_t i = 0; i < data_bytes; ++i) f[8 + header.size() + i] = static_cast<uint8_t>(i);
  return f;
}

Result<std::vector<SafetensorsTensor>> parse(const std::vector<uint8_t>& f) {
  return parse_safetensors(f.data(), f.size(), "t.safetensors");
}

std::string error_of(const std::string& header, size_t data_bytes) {
  auto r = parse(make_file(header, data_bytes));
  EXPECT_FALSE(r.is_ok()) << header;
  return r.is_ok() ? "" : r.status().message();
}

TEST(Safetensors, ReadsTensorsInDataOrder) {
  const std::string h =
      R"({"__metadata__":{"format":"pt"},"b":{"dtype":"F16","shape":[2],"data_offsets":[24,28]},)"
      R"("a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},"ids":{"dtype":"I64","shape":[1],"data_offsets":[28,36]}})";
  const auto f = make_file(h, 36);
  auto r = parse(f);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  ASSERT_EQ(r->size(), 3u);
  EXPECT_EQ((*r)[0].name, "a");
  EXPECT_EQ((*r)[0].type, DType::F32);
  EXPECT_TRUE((*r)[0].readable);
  EXPECT_EQ((*r)[0].shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ((*r)[0].rows(), 2);
  EXPECT_EQ((*r)[0].cols(), 3);
  EXPECT_EQ((*r)[0].data, f.data() + 8 + h.size());
  EXPECT_EQ((*r)[1].name, "b");
  EXPECT_EQ((*r)[1].type, DType::F16);
  EXPECT_EQ((*r)[1].nbytes, 4u);
  EXPECT_EQ((*r)[2].name, "ids");
  EXPECT_FALSE((*r)[2].readable);  // parsed, but not a weight format
}

TEST(Safetensors, BadJsonIsAnError) {
  EXPECT_NE(error_of(R"({"a":{"dtype":"F32",)", 0).find("not valid JSON"), std::string::npos);
  EXPECT_NE(error_of(R"([1,2])", 0).find("not a JSON object"), std::string::npos);
  EXPECT_NE(error_of(R"({"a":3})", 0).find("not an object"), std::string::npos);
}

TEST(Safetensors, OffsetsPastTheEndAreAnError) {
  const std::string m = error_of(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 12);
  EXPECT_NE(m.find("past the end"), std::string::npos) << m;
  EXPECT_NE(m.find("'a'"), std::string::npos) << m;
}

TEST(Safetensors, SizeThatDisagreesWithTheShapeIsAnError) {
  const std::string m = error_of(R"({"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,12]}})", 16);
  EXPECT_NE(m.find("16 bytes expected"), std::string::npos) << m;
  EXPECT_NE(error_of(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[8,4]}})", 16).find("backwards"),
            std::string::npos);
  EXPECT_NE(
      error_of(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296,4],"data_offsets":[0,16]}})", 16).find("overflow"),
      std::string::npos);
  EXPECT_NE(error_of(R"({"a":{"dtype":"F32","shape":[-4],"data_offsets":[0,16]}})", 16).find("negative"),
            std::string::npos);
}

TEST(Safetensors, UnknownDtypeIsAnError) {
  const std::string m = error_of(R"({"a":{"dtype":"F17","shape":[4],"data_offsets":[0,16]}})", 16);
  EXPECT_NE(m.find("unknown dtype 'F17'"), std::string::npos) << m;
}

TEST(Safetensors, MissingFieldsAreAnError) {
  EXPECT_NE(error_of(R"({"a":{"shape":[4],"data_offsets":[0,16]}})", 16).find("dtype"), std::string::npos);
  EXPECT_NE(error_of(R"({"a":{"dtype":"F32","data_offsets":[0,16]}})", 16).find("shape"), std::string::npos);
  EXPECT_NE(error_of(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0]}})", 16).find("data_offsets"),
            std::string::npos);
}

TEST(Safetensors, OverlappingTensorsAreAnError) {
  const std::string m = error_of(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                                 R"("b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
                                 16);
  EXPECT_NE(m.find("overlap"), std::string::npos) << m;
}

TEST(Safetensors, TruncatedFilesAreAnError) {
  std::vector<uint8_t> tiny = {1, 2, 3};
  EXPECT_FALSE(parse(tiny).is_ok());
  const std::string h = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  auto long_header = make_file(h, 4, h.size() + 100);  // claims more header than the file holds
  auto r = parse(long_header);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("past the end of the file"), std::string::npos) << r.status().message();
  auto huge = make_file(h, 4, uint64_t{1} << 62);
  EXPECT_FALSE(parse(huge).is_ok());
}

// Every truncation of a valid file is an error or a valid parse, never a crash (the
// sanitizer build checks the reads).
TEST(Safetensors, EveryPrefixOfAFileIsSafe) {
  const std::string h =
      R"({"a":{"dtype":"BF16","shape":[3,2],"data_offsets":[0,12]},"b":{"dtype":"F32","shape":[1],"data_offsets":[12,16]}})";
  const auto f = make_file(h, 16);
  for (size_t n = 0; n < f.size(); ++n) {
    std::vector<uint8_t> prefix(f.begin(), f.begin() + static_cast<ptrdiff_t>(n));
    EXPECT_FALSE(parse_safetensors(prefix.data(), prefix.size(), "p").is_ok()) << n;
  }
  EXPECT_TRUE(parse(f).is_ok());
}

// Random byte damage anywhere in a file (header digits, quotes, offsets, the length) is
// an error or a parse whose every tensor lies inside the buffer.
TEST(Safetensors, RandomDamageNeverReadsOutsideTheFile) {
  const std::string h =
      R"({"w":{"dtype":"F16","shape":[4,2],"data_offsets":[0,16]},"b":{"dtype":"F32","shape":[2],"data_offsets":[16,24]}})";
  const auto f = make_file(h, 24);
  std::mt19937 rng(7);
  int parsed = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    std::vector<uint8_t> g = f;
    const int flips = 1 + static_cast<int>(rng() % 3);
    for (int k = 0; k < flips; ++k) g[rng() % g.size()] = static_cast<uint8_t>(rng());
    auto r = parse_safetensors(g.data(), g.size(), "fuzz");
    if (!r.is_ok()) continue;
    ++parsed;
    for (const SafetensorsTensor& t : *r) {
      ASSERT_GE(t.data, g.data());
      ASSERT_LE(t.data + t.nbytes, g.data() + g.size());
    }
  }
  EXPECT_GT(parsed, 0);  // some damage (in the data section) leaves a valid file
}

}  // namespace
}  // namespace pagoda

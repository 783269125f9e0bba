// The block structs, the dtype table and the dispatch table agree with each other and
// with GGUF; row functions touch exactly row_bytes(t, n) bytes.
#include <gtest/gtest.h>

#include "quant/blocks.h"
#include "quant/formats.h"
#include "quant_test_util.h"

namespace pagoda {
namespace {

using testing::RowBuffer;

TEST(FormatTable, BlockStructsMatchDtypeTable) {
  struct Expect {
    DType t;
    size_t size;
    int64_t block;
  };
  const Expect expected[] = {
      {DType::Q4_0, sizeof(BlockQ4_0), kQK},   {DType::Q4_1, sizeof(BlockQ4_1), kQK},
      {DType::Q5_0, sizeof(BlockQ5_0), kQK},   {DType::Q5_1, sizeof(BlockQ5_1), kQK},
      {DType::Q8_0, sizeof(BlockQ8_0), kQK},   {DType::Q8_1, sizeof(BlockQ8_1), kQK},
      {DType::Q2_K, sizeof(BlockQ2_K), kQK_K}, {DType::Q3_K, sizeof(BlockQ3_K), kQK_K},
      {DType::Q4_K, sizeof(BlockQ4_K), kQK_K}, {DType::Q5_K, sizeof(BlockQ5_K), kQK_K},
      {DType::Q6_K, sizeof(BlockQ6_K), kQK_K}, {DType::Q8_K, sizeof(BlockQ8_K), kQK_K},
  };
  for (const auto& e : expected) {
    const auto& info = dtype_info(e.t);
    EXPECT_EQ(static_cast<size_t>(info.type_size), e.size) << info.name;
    EXPECT_EQ(info.block_size, e.block) << info.name;
    EXPECT_TRUE(info.quantized) << info.name;
  }
  EXPECT_EQ(dtype_info(DType::F16).type_size, 2);
  EXPECT_EQ(dtype_info(DType::BF16).type_size, 2);
  EXPECT_EQ(dtype_info(DType::F32).type_size, 4);
}

TEST(FormatTable, GgufTypeIds) {
  // Fixed by the GGUF spec; a wrong id would misread every tensor of that type.
  EXPECT_EQ(static_cast<uint32_t>(DType::Q4_0), 2u);
  EXPECT_EQ(static_cast<uint32_t>(DType::Q8_0), 8u);
  EXPECT_EQ(static_cast<uint32_t>(DType::Q2_K), 10u);
  EXPECT_EQ(static_cast<uint32_t>(DType::Q6_K), 14u);
  EXPECT_EQ(static_cast<uint32_t>(DType::Q8_K), 15u);
  EXPECT_EQ(static_cast<uint32_t>(DType::BF16), 30u);
}

TEST(FormatTable, CapabilitiesAndVecDotTypes) {
  for (DType t : testing::dequantizable_types()) {
    EXPECT_TRUE(can_dequantize(t)) << dtype_name(t);
    EXPECT_TRUE(can_quantize(t)) << dtype_name(t);
    EXPECT_TRUE(can_quantize(vec_dot_type(t))) << dtype_name(t);
  }
  EXPECT_EQ(vec_dot_type(DType::F32), DType::F32);
  EXPECT_EQ(vec_dot_type(DType::F16), DType::F16);
  EXPECT_EQ(vec_dot_type(DType::BF16), DType::BF16);
  for (DType t : {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0})
    EXPECT_EQ(vec_dot_type(t), DType::Q8_0) << dtype_name(t);
  for (DType t : {DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q8_K})
    EXPECT_EQ(vec_dot_type(t), DType::Q8_K) << dtype_name(t);
  for (DType t : {DType::Q8_1, DType::I8, DType::I32, DType::F64}) {
    EXPECT_FALSE(can_dequantize(t)) << dtype_name(t);
    EXPECT_FALSE(can_quantize(t)) << dtype_name(t);
  }
}

// The precondition "n is a multiple of the block size" is the caller's to check; given
// it, a row of k blocks uses exactly row_bytes and n floats, nothing past them.
TEST(FormatTable, RowFunctionsStayInsideTheRow) {
  for (DType t : testing::dequantizable_types()) {
    const int64_t n = 3 * dtype_info(t).block_size;
    const auto x = testing::make_row(testing::Shape::kGaussian, n, 7);
    RowBuffer q(t, n);
    quantize_row(t, x.data(), q.data(), n);
    EXPECT_TRUE(q.canary_intact()) << dtype_name(t);
    std::vector<float> y(static_cast<size_t>(n) + 16, -7.0f);
    dequantize_row(t, q.data(), y.data(), n);
    for (size_t i = static_cast<size_t>(n); i < y.size(); ++i) ASSERT_EQ(y[i], -7.0f) << dtype_name(t);
  }
}

// Blocks are independent: a row quantizes to the concatenation of its blocks.
TEST(FormatTable, BlocksAreIndependent) {
  for (DType t : testing::dequantizable_types()) {
    const int64_t bs = dtype_info(t).block_size;
    const int64_t n = 4 * bs;
    const auto x = testing::make_row(testing::Shape::kMixedScales, n, 11);
    RowBuffer whole(t, n);
    quantize_row(t, x.data(), whole.data(), n);
    const size_t block_bytes = row_bytes(t, bs);
    for (int64_t b = 0; b < 4; ++b) {
      RowBuffer one(t, bs);
      quantize_row(t, x.data() + b * bs, one.data(), bs);
      EXPECT_EQ(std::memcmp(one.bytes(), whole.bytes() + b * block_bytes, block_bytes), 0)
          << dtype_name(t) << " block " << b;
    }
  }
}

}  // namespace
}  // namespace pagoda

// DotKernels::dot_rows against dot, on every target this CPU can run: a body that runs
// several rows together must give each row exactly what dot gives it, for any row count
// (the fours and the one to three left over) and rows whose block count leaves a tail.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/matmul/dot_kernels.h"
#include "quant/formats.h"

namespace pagoda {
namespace {

struct Param {
  DType type;
  SimdTarget target;
};

std::vector<Param> all_params() {
  std::vector<Param> out;
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1,
                  DType::Q8_0, DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K})
    for (SimdTarget s : runnable_simd_targets()) out.push_back({t, s});
  return out;
}

class DotRowsTest : public ::testing::TestWithParam<Param> {};

std::vector<float> random_row(std::mt19937& rng, int64_t n) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = nd(rng);
  for (int64_t i = 0; i < n; i += 97) v[i] *= 8.0f;
  return v;
}

TEST_P(DotRowsTest, EveryRowEqualsDotBitForBit) {
  const auto [t, target] = GetParam();
  const DotKernels k = dot_kernels(t, target);
  ASSERT_NE(k.dot_rows, nullptr);
  const DType xt = vec_dot_type(t);
  // Float formats: 32 values stand in for a block.
  const int64_t unit = dtype_info(t).block_size == 1 ? 32 : dtype_info(t).block_size;
  std::mt19937 rng(5);
  // Block counts 1, 3, 4, 7, 64 + 5: no full step of four, only a tail, none, both.
  for (int64_t blocks : {1, 3, 4, 7, 69}) {
    const int64_t n = blocks * unit;
    const int64_t max_rows = 9;
    // Rows further apart than their length: the stride must be honoured.
    const size_t wb = row_bytes(t, n), stride = wb + 64;
    std::vector<uint8_t> w(stride * max_rows), x(row_bytes(xt, n));
    for (int64_t r = 0; r < max_rows; ++r) quantize_row(t, random_row(rng, n).data(), w.data() + r * stride, n);
    k.quantize_x(random_row(rng, n).data(), x.data(), n);
    for (int64_t rows = 1; rows <= max_rows; ++rows) {
      std::vector<float> y(rows + 1, -7.0f);
      k.dot_rows(n, w.data(), stride, rows, x.data(), y.data());
      for (int64_t r = 0; r < rows; ++r) {
        const float want = k.dot(n, w.data() + r * stride, x.data());
        ASSERT_EQ(std::memcmp(&y[r], &want, sizeof(float)), 0)
            << "n=" << n << " rows=" << rows << " row " << r << ": " << y[r] << " vs " << want;
      }
      ASSERT_EQ(y[rows], -7.0f) << "wrote past the last row, n=" << n << " rows=" << rows;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTargets, DotRowsTest, ::testing::ValuesIn(all_params()),
                         [](const auto& info) {
                           return std::string(dtype_name(info.param.type)) + "_" +
                                  simd_target_name(info.param.target);
                         });

}  // namespace
}  // namespace pagoda

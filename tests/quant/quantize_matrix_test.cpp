// Whole-matrix quantization: the bytes equal quantize_row applied row by row, for every
// format `pagoda quantize` writes, whatever the thread count; the RTN strategy is that;
// the non-finite check finds the first bad row.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "quant/formats.h"
#include "quant/quant_strategy.h"
#include "quant/quantize_matrix.h"
#include "quant/type_policy.h"
#include "quant_test_util.h"

namespace pagoda {
namespace {

using testing::Shape;

const std::vector<DType> kTargets = {DType::Q8_0, DType::Q6_K, DType::Q5_K, DType::Q4_K, DType::Q4_0,
                                     DType::Q3_K, DType::Q2_K, DType::Q5_1, DType::Q5_0, DType::Q4_1,
                                     DType::F16,  DType::BF16, DType::F32};

// rows x cols floats, each row a different shape and seed.
std::vector<float> matrix(int64_t rows, int64_t cols) {
  std::vector<float> w;
  for (int64_t r = 0; r < rows; ++r) {
    auto row = testing::make_row(static_cast<Shape>(r % 5), cols, static_cast<uint32_t>(100 + r));
    w.insert(w.end(), row.begin(), row.end());
  }
  return w;
}

std::vector<uint8_t> by_rows(DType t, const std::vector<float>& w, int64_t rows, int64_t cols) {
  const size_t rb = row_bytes(t, cols);
  std::vector<uint8_t> out(rb * static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) quantize_row(t, w.data() + r * cols, out.data() + r * rb, cols);
  return out;
}

std::vector<uint8_t> by_matrix(DType t, const std::vector<float>& w, int64_t rows, int64_t cols, int threads) {
  ThreadPool pool(threads);
  std::vector<uint8_t> out(row_bytes(t, cols) * static_cast<size_t>(rows) + 64, 0xA5);
  quantize_matrix(t, w.data(), rows, cols, out.data(), pool);
  for (size_t i = out.size() - 64; i < out.size(); ++i) EXPECT_EQ(out[i], 0xA5) << "wrote past the end";
  out.resize(out.size() - 64);
  return out;
}

TEST(QuantizeMatrix, EqualsQuantizeRowForEveryTargetAndThreadCount) {
  for (DType t : kTargets) {
    ASSERT_TRUE(can_quantize(t) && is_quantize_target(t)) << dtype_name(t);
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{37, 512}, {3, 256}, {1, 2048}, {130, 256}}) {
      const auto w = matrix(rows, cols);
      const auto want = by_rows(t, w, rows, cols);
      for (int threads : {1, 2, 3, 8})
        ASSERT_EQ(by_matrix(t, w, rows, cols, threads), want)
            << dtype_name(t) << " " << rows << "x" << cols << " threads " << threads;
    }
  }
}

TEST(QuantizeMatrix, DequantizeMatrixEqualsDequantizeRow) {
  ThreadPool pool(3);
  const int64_t rows = 19, cols = 512;
  const auto w = matrix(rows, cols);
  for (DType t : kTargets) {
    const auto q = by_rows(t, w, rows, cols);
    std::vector<float> want(static_cast<size_t>(rows * cols)), got(want.size());
    const size_t rb = row_bytes(t, cols);
    for (int64_t r = 0; r < rows; ++r) dequantize_row(t, q.data() + r * rb, want.data() + r * cols, cols);
    dequantize_matrix(t, q.data(), rows, cols, got.data(), pool);
    ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0) << dtype_name(t);
  }
}

TEST(QuantizeMatrix, FindsTheFirstNonFiniteRow) {
  ThreadPool pool(4);
  const int64_t rows = 64, cols = 256;
  auto w = matrix(rows, cols);
  EXPECT_EQ(first_non_finite_row(w.data(), rows, cols, pool), -1);
  w[static_cast<size_t>(40 * cols + 7)] = std::numeric_limits<float>::infinity();
  EXPECT_EQ(first_non_finite_row(w.data(), rows, cols, pool), 40);
  w[static_cast<size_t>(9 * cols + 255)] = std::nanf("");
  w[static_cast<size_t>(60 * cols)] = -std::numeric_limits<float>::infinity();
  EXPECT_EQ(first_non_finite_row(w.data(), rows, cols, pool), 9);
}

TEST(QuantizeMatrix, RtnStrategyWritesTheReferenceBytesAndChecksTheShape) {
  ThreadPool pool(2);
  RtnStrategy rtn;
  EXPECT_EQ(rtn.name(), "rtn");
  const int64_t rows = 5, cols = 512;
  const auto w = matrix(rows, cols);
  std::vector<uint8_t> out(row_bytes(DType::Q4_K, cols) * rows);
  ASSERT_TRUE(rtn.quantize(QuantJob{"blk.0.attn_q.weight", w.data(), rows, cols, DType::Q4_K, out.data()}, pool));
  EXPECT_EQ(out, by_rows(DType::Q4_K, w, rows, cols));
  Status st = rtn.quantize(QuantJob{"t.weight", w.data(), 10, 256 - 32, DType::Q4_K, out.data()}, pool);
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("t.weight"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace pagoda

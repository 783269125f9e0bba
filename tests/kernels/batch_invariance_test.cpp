// Whether a token's matmul output depends on the other tokens of the call. The engine
// batches many sequences' tokens into one matmul, and its tests require a request's
// greedy output to equal its output run alone. On the scalar target the tile kernel is
// the dot product per (row, token), so results are bit-identical however tokens are
// batched: the engine's exactness tests run there. SIMD bodies sum in other orders for
// single-token GEMV, register-blocked tiles and tile tails, a float-rounding difference
// the engine's SIMD tests allow for (near-tie tolerance).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "kernels/matmul/dot_kernels.h"
#include "quant/formats.h"

namespace pagoda {
namespace {

struct Problem {
  int64_t rows = 0, cols = 0, tokens = 0;
  size_t rb = 0, xb = 0;
  std::vector<uint8_t> w, x;
};

Problem make_problem(DType t, const DotKernels& k, int64_t rows, int64_t cols, int64_t tokens) {
  Problem p;
  p.rows = rows;
  p.cols = cols;
  p.tokens = tokens;
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> f(cols);
  p.rb = row_bytes(t, cols);
  p.xb = row_bytes(vec_dot_type(t), cols);
  p.w.resize(p.rb * rows);
  p.x.resize(p.xb * tokens);
  for (int64_t r = 0; r < rows; ++r) {
    for (float& v : f) v = nd(rng);
    quantize_row(t, f.data(), p.w.data() + r * p.rb, cols);
  }
  for (int64_t tk = 0; tk < tokens; ++tk) {
    for (float& v : f) v = nd(rng);
    k.quantize_x(f.data(), p.x.data() + tk * p.xb, cols);
  }
  return p;
}

// Tokens [t0, t0 + width) through the tile, compared with the same tokens of `all`.
int mismatched_tokens(const DotKernels& k, const Problem& p, const std::vector<float>& all, int64_t t0, int64_t width) {
  std::vector<float> y(width * p.rows);
  k.tile(p.cols, p.w.data(), p.rb, p.rows, p.x.data() + t0 * p.xb, p.xb, width, y.data(), p.rows);
  int bad = 0;
  for (int64_t t = 0; t < width; ++t)
    bad += std::memcmp(&y[t * p.rows], &all[(t0 + t) * p.rows], p.rows * sizeof(float)) != 0;
  return bad;
}

class BatchInvarianceTest : public ::testing::TestWithParam<DType> {};

TEST_P(BatchInvarianceTest, ScalarTileEqualsSingleTokenDotBitForBit) {
  const DType t = GetParam();
  const DotKernels k = dot_kernels(t, SimdTarget::kScalar);
  const Problem p = make_problem(t, k, 19, 512, 7);
  std::vector<float> all(p.tokens * p.rows);
  k.tile(p.cols, p.w.data(), p.rb, p.rows, p.x.data(), p.xb, p.tokens, all.data(), p.rows);
  int bad = 0;
  for (int64_t tk = 0; tk < p.tokens; ++tk)
    for (int64_t r = 0; r < p.rows; ++r) {
      const float one = k.dot(p.cols, p.w.data() + r * p.rb, p.x.data() + tk * p.xb);
      bad += std::memcmp(&one, &all[tk * p.rows + r], sizeof(float)) != 0;
    }
  EXPECT_EQ(bad, 0);
  EXPECT_EQ(mismatched_tokens(k, p, all, 3, 1), 0);
}

// The AVX2 K-quant kernels combine each super-block's exact integer sums with the same
// float operations in the dot and the tile, so they batch exactly too: every token count
// from 1 (the dot) through the dot fallback of short chunks, one and two 8-lane vectors,
// to 64-token chunks and their tails.
TEST_P(BatchInvarianceTest, Avx2KQuantTileEqualsSingleTokenDotBitForBit) {
  const DType t = GetParam();
  if (t != DType::Q2_K && t != DType::Q3_K && t != DType::Q4_K && t != DType::Q5_K && t != DType::Q6_K)
    GTEST_SKIP() << "only the K-quant bodies are exact on AVX2";
  if (best_simd_target() < SimdTarget::kAvx2) GTEST_SKIP() << "this CPU has no AVX2";
  const DotKernels k = dot_kernels(t, SimdTarget::kAvx2);
  // Super-blocks in pairs and an odd one left: 1, 2 and 5 per row.
  for (const int64_t cols : {256, 512, 1280}) {
    const Problem p = make_problem(t, k, 35, cols, 70);
    std::vector<float> alone(p.tokens * p.rows);
    for (int64_t tk = 0; tk < p.tokens; ++tk)
      for (int64_t r = 0; r < p.rows; ++r)
        alone[tk * p.rows + r] = k.dot(p.cols, p.w.data() + r * p.rb, p.x.data() + tk * p.xb);
    for (const int64_t width : {1, 2, 4, 5, 8, 9, 16, 17, 64, 70}) {
      int bad = 0;
      for (int64_t t0 = 0; t0 + width <= p.tokens; t0 += width) bad += mismatched_tokens(k, p, alone, t0, width);
      EXPECT_EQ(bad, 0) << cols << " columns, " << width << " tokens per call";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, BatchInvarianceTest,
                         ::testing::Values(DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0,
                                           DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q2_K, DType::Q3_K,
                                           DType::Q4_K, DType::Q5_K, DType::Q6_K),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace pagoda

// GPTQ against its own objective, computed independently: the layer's output error
// tr(D H D^T) over the calibration inputs must drop below round to nearest's when the
// inputs are correlated, and GPTQ must reduce to round to nearest when H is the identity
// (nothing to compensate).
#include "quant/gptq.h"

#include <gtest/gtest.h>

#include <random>
#include <utility>

#include "quant/block_grid.h"
#include "quant_test_util.h"

namespace pagoda {
namespace {

const DType kGridTypes[] = {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K};

// Inputs with a few dominant directions and channel scales spread over two decades, as
// real activations have.
std::vector<float> correlated_inputs(int64_t n, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t k = 8;
  std::vector<float> mix(static_cast<size_t>(k * cols)), x(static_cast<size_t>(n * cols));
  for (float& v : mix) v = normal(rng);
  std::vector<float> scale(static_cast<size_t>(cols));
  for (int64_t c = 0; c < cols; ++c) scale[static_cast<size_t>(c)] = std::pow(10.0f, 2.0f * static_cast<float>(rng() % 1000) / 1000.0f - 1.0f);
  for (int64_t t = 0; t < n; ++t) {
    float z[8];
    for (float& v : z) v = normal(rng);
    for (int64_t c = 0; c < cols; ++c) {
      float v = 0.3f * normal(rng);
      for (int64_t j = 0; j < k; ++j) v += z[j] * mix[static_cast<size_t>(j * cols + c)];
      x[static_cast<size_t>(t * cols + c)] = v * scale[static_cast<size_t>(c)];
    }
  }
  return x;
}

std::vector<float> gram(const std::vector<float>& x, int64_t n, int64_t cols) {
  std::vector<float> h(static_cast<size_t>(cols * cols), 0.0f);
  for (int64_t i = 0; i < cols; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      double s = 0;
      for (int64_t t = 0; t < n; ++t) s += static_cast<double>(x[static_cast<size_t>(t * cols + i)]) * x[static_cast<size_t>(t * cols + j)];
      h[static_cast<size_t>(i * cols + j)] = static_cast<float>(s);
    }
  return h;
}

// sum over rows of |X (q - w)|^2, straight from the inputs.
double output_error(DType t, const std::vector<uint8_t>& q, const std::vector<float>& w, const std::vector<float>& x,
                    int64_t rows, int64_t cols, int64_t n) {
  std::vector<float> deq(static_cast<size_t>(cols));
  double err = 0;
  for (int64_t r = 0; r < rows; ++r) {
    dequantize_row(t, q.data() + static_cast<size_t>(r) * row_bytes(t, cols), deq.data(), cols);
    for (int64_t tok = 0; tok < n; ++tok) {
      double y = 0;
      for (int64_t c = 0; c < cols; ++c)
        y += static_cast<double>(deq[static_cast<size_t>(c)] - w[static_cast<size_t>(r * cols + c)]) *
             x[static_cast<size_t>(tok * cols + c)];
      err += y * y;
    }
  }
  return err;
}

// The rows quantized both ways: round to nearest, and GPTQ with factor f.
std::pair<std::vector<uint8_t>, std::vector<uint8_t>> rtn_and_gptq(DType t, const GptqFactor& f,
                                                                   const std::vector<float>& w, int64_t rows,
                                                                   int64_t cols, ThreadPool& pool) {
  std::vector<uint8_t> rtn(row_bytes(t, cols) * static_cast<size_t>(rows)), gptq(rtn.size());
  for (int64_t r = 0; r < rows; ++r)
    quantize_row(t, w.data() + r * cols, rtn.data() + static_cast<size_t>(r) * row_bytes(t, cols), cols);
  std::vector<float> work = w;
  gptq_quantize(t, f, work.data(), rows, gptq.data(), pool);
  return {rtn, gptq};
}

TEST(Gptq, LowersTheOutputErrorBelowRoundToNearestOnCorrelatedInputs) {
  const int64_t rows = 24, cols = 512, n = 384;
  const std::vector<float> x = correlated_inputs(n, cols, 1);
  const std::vector<float> h = gram(x, n, cols);
  auto f = gptq_factor(h.data(), cols);
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  ThreadPool pool(2);
  for (DType t : kGridTypes) {
    const std::vector<float> w = testing::make_row(testing::Shape::kGaussian, rows * cols, 9);
    const auto [rtn, gptq] = rtn_and_gptq(t, *f, w, rows, cols, pool);
    const double e_rtn = output_error(t, rtn, w, x, rows, cols, n);
    const double e_gptq = output_error(t, gptq, w, x, rows, cols, n);
    EXPECT_LT(e_gptq, 0.8 * e_rtn) << dtype_name(t) << ": GPTQ " << e_gptq << " vs RTN " << e_rtn;
  }
}

TEST(Gptq, WithAnIdentityHessianItIsRoundToNearest) {
  const int64_t rows = 4, cols = 256;
  std::vector<float> h(static_cast<size_t>(cols * cols), 0.0f);
  for (int64_t i = 0; i < cols; ++i) h[static_cast<size_t>(i * cols + i)] = 1.0f;
  auto f = gptq_factor(h.data(), cols);
  ASSERT_TRUE(f.is_ok());
  ThreadPool pool(2);
  for (DType t : kGridTypes) {
    const std::vector<float> w = testing::make_row(testing::Shape::kGaussian, rows * cols, 4);
    const auto [rtn, gptq] = rtn_and_gptq(t, *f, w, rows, cols, pool);
    testing::expect_grid_rounding_matches_rtn(t, w.data(), rows * cols, rtn, gptq, std::string(dtype_name(t)));
  }
}

TEST(Gptq, ColumnsNoInputReachesAreZeroedAndTheRestStillFactor) {
  const int64_t cols = 256, n = 300;
  std::vector<float> x = correlated_inputs(n, cols, 2);
  for (int64_t t = 0; t < n; ++t) x[static_cast<size_t>(t * cols + 7)] = 0.0f;
  const std::vector<float> h = gram(x, n, cols);
  auto f = gptq_factor(h.data(), cols);
  ASSERT_TRUE(f.is_ok());
  EXPECT_EQ(f->dead[7], 1);
  EXPECT_EQ(f->dead[8], 0);
  std::vector<float> w = testing::make_row(testing::Shape::kGaussian, cols, 3);
  std::vector<uint8_t> q(row_bytes(DType::Q4_K, cols));
  ThreadPool pool(1);
  gptq_quantize(DType::Q4_K, *f, w.data(), 1, q.data(), pool);
  std::vector<float> deq(static_cast<size_t>(cols));
  dequantize_row(DType::Q4_K, q.data(), deq.data(), cols);
  float amax = 0;
  for (float v : deq) amax = std::max(amax, std::fabs(v));
  EXPECT_LT(std::fabs(deq[7]), 0.1f * amax) << "a dead column quantizes the level nearest zero";
}

// SparseGPT's 2:4 pass against magnitude pruning (the formats' own quantizer) and against
// pruning by its own rule without compensation (its choice of kept weights, each rounded
// to nearest): both errors must be clearly higher, and every group must keep two.
TEST(SparseGpt, CompensatedPruningLowersTheOutputErrorBelowMagnitudeAndBelowNoCompensation) {
  const int64_t rows = 16, cols = 512, n = 384;
  const std::vector<float> x = correlated_inputs(n, cols, 1);
  const std::vector<float> h = gram(x, n, cols);
  auto f = gptq_factor(h.data(), cols);
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  ThreadPool pool(2);
  for (DType t : {DType::Q8_0_S24, DType::Q4_0_S24}) {
    const std::vector<float> w = testing::make_row(testing::Shape::kGaussian, rows * cols, 9);
    const size_t rb = row_bytes(t, cols);
    std::vector<uint8_t> magnitude(rb * rows), sparsegpt(rb * rows), uncompensated(rb * rows);
    for (int64_t r = 0; r < rows; ++r) quantize_row(t, w.data() + r * cols, magnitude.data() + r * rb, cols);
    std::vector<float> work = w;
    sparsegpt_quantize_2_4(t, *f, work.data(), rows, sparsegpt.data(), pool);
    // Its kept positions, each value rounded to nearest from the original weights.
    std::vector<float> deq(static_cast<size_t>(cols)), kept(static_cast<size_t>(cols));
    for (int64_t r = 0; r < rows; ++r) {
      dequantize_row(t, sparsegpt.data() + r * rb, deq.data(), cols);
      int nonzero = 0;
      for (int64_t c = 0; c < cols; ++c) {
        if (c % 4 == 0) {
          ASSERT_LE(nonzero, 2);
          nonzero = 0;
        }
        nonzero += deq[c] != 0.0f;
      }
      // Ties to zero aside, the kept positions are the nonzero ones.
      for (int64_t c = 0; c < cols; ++c) kept[c] = deq[c] != 0.0f ? w[r * cols + c] : 0.0f;
      quantize_row(t, kept.data(), uncompensated.data() + r * rb, cols);
    }
    const double e_mag = output_error(t, magnitude, w, x, rows, cols, n);
    const double e_sgpt = output_error(t, sparsegpt, w, x, rows, cols, n);
    const double e_unc = output_error(t, uncompensated, w, x, rows, cols, n);
    EXPECT_LT(e_sgpt, 0.7 * e_mag) << dtype_name(t) << ": SparseGPT " << e_sgpt << " vs magnitude " << e_mag;
    EXPECT_LT(e_sgpt, 0.7 * e_unc) << dtype_name(t) << ": SparseGPT " << e_sgpt << " vs uncompensated " << e_unc;
  }
}

TEST(Gptq, AllZeroActivationsAreAnError) {
  std::vector<float> h(64 * 64, 0.0f);
  auto f = gptq_factor(h.data(), 64);
  ASSERT_FALSE(f.is_ok());
  EXPECT_NE(f.status().message().find("all zero"), std::string::npos);
}

}  // namespace
}  // namespace pagoda

// The W8A8 scalar references (src/quant/w8a8.h). Round trip: a row quantized with
// scale d = amax / 127 decodes within half a step of every value, |x - d * q| <= d / 2,
// plus float rounding: x * (127 / amax) carries a few ulps of relative error (of at most
// 127 levels), and d * q rounds once more, so the slack is 1e-6 * amax. The largest
// value lands exactly on +-127, a zero row gives scale 0. Activations follow the same
// rounding, report the sum of their quants and zero their padding; the integer dot is
// exact up to the longest row the format allows.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "quant/w8a8.h"

namespace pagoda {
namespace {

std::vector<float> normal_row(int64_t n, float stddev, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.0f, stddev);
  std::vector<float> v(n);
  for (float& f : v) f = nd(rng);
  return v;
}

TEST(W8A8Quant, RoundTripWithinHalfAStep) {
  std::mt19937 rng(1);
  for (int64_t n : {1, 7, 32, 96, 100, 2048}) {
    for (float stddev : {1e-3f, 1.0f, 300.0f}) {
      const std::vector<float> x = normal_row(n, stddev, rng);
      std::vector<int8_t> q(n);
      const float d = quantize_row_w8a8(x.data(), q.data(), n);
      double amax = 0;
      int64_t at = 0;
      for (int64_t i = 0; i < n; ++i)
        if (std::fabs(x[i]) > amax) {
          amax = std::fabs(x[i]);
          at = i;
        }
      EXPECT_FLOAT_EQ(d, static_cast<float>(amax / 127.0));
      EXPECT_EQ(std::abs(q[at]), 127) << "the largest value sits on the last level";
      std::vector<float> y(n);
      dequantize_row_w8a8(q.data(), d, y.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_LE(std::abs(q[i]), 127);
        ASSERT_LE(std::fabs(static_cast<double>(y[i]) - x[i]), 0.5 * d + 1e-6 * amax)
            << "n=" << n << " i=" << i << " x=" << x[i] << " q=" << int{q[i]};
      }
    }
  }
}

// A guard against a rounding that is within bounds but biased: on Gaussian rows the
// error is uniform in +-d/2, RMS d / sqrt(12) = amax / (127 sqrt 12).
TEST(W8A8Quant, RmsErrorOfUniformRounding) {
  std::mt19937 rng(2);
  const int64_t n = 4096;
  const std::vector<float> x = normal_row(n, 1.0f, rng);
  std::vector<int8_t> q(n);
  const float d = quantize_row_w8a8(x.data(), q.data(), n);
  std::vector<float> y(n);
  dequantize_row_w8a8(q.data(), d, y.data(), n);
  double se = 0;
  for (int64_t i = 0; i < n; ++i) se += (static_cast<double>(y[i]) - x[i]) * (static_cast<double>(y[i]) - x[i]);
  const double rms = std::sqrt(se / n), want = d / std::sqrt(12.0);
  EXPECT_NEAR(rms, want, 0.1 * want);
}

TEST(W8A8Quant, ZeroRowAndSaturatedValues) {
  std::vector<float> x(64, 0.0f);
  std::vector<int8_t> q(64, 5);
  EXPECT_EQ(quantize_row_w8a8(x.data(), q.data(), 64), 0.0f);
  for (int8_t v : q) EXPECT_EQ(v, 0);
  x = {1.0f, -1.0f, 0.5f, -0.25f};
  q.assign(4, 0);
  const float d = quantize_row_w8a8(x.data(), q.data(), 4);
  EXPECT_EQ(d, 1.0f / 127.0f);
  EXPECT_EQ(q[0], 127);
  EXPECT_EQ(q[1], -127);
  EXPECT_EQ(q[2], 64);  // 63.5 ties to even
  EXPECT_EQ(q[3], -32);  // -31.75
}

TEST(W8A8Quant, ActivationsSumPadAndMatchTheWeightRounding) {
  std::mt19937 rng(3);
  for (int64_t n : {1, 5, 64, 65, 130, 640}) {
    const std::vector<float> x = normal_row(n, 2.0f, rng);
    const size_t stride = w8a8_act_stride(n);
    EXPECT_EQ(stride % 64, 0u);
    EXPECT_GE(stride, static_cast<size_t>(n));
    EXPECT_LT(stride, static_cast<size_t>(n) + 64);
    std::vector<int8_t> q(stride, 0x33), qw(n);
    int32_t sum = -1;
    const float d = quantize_activation_w8a8(x.data(), n, q.data(), &sum);
    EXPECT_EQ(d, quantize_row_w8a8(x.data(), qw.data(), n));
    int32_t want = 0;
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_EQ(q[i], qw[i]);
      want += q[i];
    }
    EXPECT_EQ(sum, want);
    for (size_t i = n; i < stride; ++i) EXPECT_EQ(q[i], 0) << "padding byte " << i;
  }
  // NaN and inf give defined quants in range, never UB.
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  std::vector<float> x = {1.0f, nan, -inf, 3.0f};
  std::vector<int8_t> q(w8a8_act_stride(4));
  int32_t sum = 0;
  quantize_activation_w8a8(x.data(), 4, q.data(), &sum);
  for (int i = 0; i < 4; ++i) EXPECT_LE(std::abs(q[i]), 127);
}

TEST(W8A8Quant, IntegerDotIsExactToTheLongestRow) {
  const int64_t n = kW8A8MaxCols;
  std::vector<int8_t> w(n, -128), x(n, -127);
  EXPECT_EQ(dot_w8a8_int(w.data(), x.data(), n), 128 * 127 * n);
  std::mt19937 rng(4);
  for (int64_t i = 0; i < 1000; ++i) {
    w[i] = static_cast<int8_t>(rng());
    x[i] = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
  }
  int64_t want = 0;
  for (int64_t i = 0; i < 1000; ++i) want += static_cast<int64_t>(w[i]) * x[i];
  EXPECT_EQ(dot_w8a8_int(w.data(), x.data(), 1000), want);
  EXPECT_EQ(w8a8_scale_output(1000, 0.5f, 0.25f), 125.0f);
}

}  // namespace
}  // namespace pagoda

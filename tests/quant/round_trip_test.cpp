// quantize -> dequantize error, checked value by value against the grid each block
// actually encodes. Every quantizer here ends by rounding each value to the nearest level
// of its group (clamped to the group's range), so for a value x decoded as y:
//     |y - x| <= dist(x, [lo, hi]) + c * |step| + abs_slack
// where [lo, hi] and step come from the decoded block header. c is 1/2 plus what the FP16
// storage of the scale adds: the legacy formats round x/d with the FP32 d but decode with
// FP16(d), off by up to 2^-11 relative, times the largest level |q| (8, 16, 127...). The
// K-quants re-round against the decoded scales, so only float rounding remains.
// A second test bounds the RMS error on Gaussian data, as a guard against a scale search
// that still rounds correctly but picks poor scales.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "base/fp16.h"
#include "quant/blocks.h"
#include "quant/formats.h"
#include "quant/k_unpack.h"
#include "quant_test_util.h"

namespace pagoda {
namespace {

using testing::RowBuffer;
using testing::Shape;

constexpr double kHalfEps = 1.0 / 2048.0;   // FP16 relative rounding, 2^-11
constexpr double kHalfSubnormal = 0x1p-25;  // FP16 absolute rounding below 2^-14

struct Grid {
  double step;       // distance between adjacent levels (may be negative)
  double lo, hi;     // the group's representable range
  double c;          // allowed error in steps inside the range
  double abs_slack;  // absolute allowance (FP16 rounding of a stored min)
};

// Levels d*q, qmin <= q <= qmax. fp16_levels: d was stored as FP16 after the values were
// rounded with the FP32 d; when d is an FP16 subnormal its rounding is absolute (2^-25),
// times the largest |q|.
Grid symmetric(double d, int qmin, int qmax, double c, bool fp16_levels = false) {
  const double a = d * qmin;
  const double b = d * qmax;
  const double slack = fp16_levels ? (std::max(-qmin, qmax) + 1) * kHalfSubnormal : 0.0;
  return {d, std::min(a, b), std::max(a, b), c, slack};
}

// Q4_1 and Q5_1: levels m + d*q; the stored FP16 min is off by up to 2^-11 of itself
// (2^-25 when subnormal), and a subnormal d by 2^-25 per level.
template <typename Block, typename Push>
void push_affine(const Block* blocks, int64_t nb, int qmax, Push& push) {
  for (int64_t i = 0; i < nb; ++i) {
    const double d = fp16_to_fp32(blocks[i].d);
    const double m = fp16_to_fp32(blocks[i].m);
    push(Grid{d, m, m + qmax * d, 0.5 + (qmax + 1) * kHalfEps,
              std::fabs(m) * kHalfEps + (qmax + 2) * kHalfSubnormal},
         kQK);
  }
}

// Q4_K and Q5_K share the header (d, dmin, 6-bit scales and mins).
template <typename Block, typename Push>
void push_k4(const Block* blocks, int64_t nb, int qmax, double c, Push& push) {
  for (int64_t i = 0; i < nb; ++i) {
    const Block& b = blocks[i];
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, m;
      quant::unpack_k4_scale_min(j, b.scales, &sc, &m);
      const double s = fp16_to_fp32(b.d) * static_cast<float>(sc);
      const double lo = -static_cast<double>(fp16_to_fp32(b.dmin) * static_cast<float>(m));
      push(Grid{s, lo, lo + qmax * s, c, 0.0}, 32);
    }
  }
}

// Grid of every value of a quantized row.
std::vector<Grid> grids_of(DType t, const void* row, int64_t n) {
  std::vector<Grid> g;
  g.reserve(static_cast<size_t>(n));
  const double legacy_c8 = 0.5 + 9 * kHalfEps;
  auto push = [&](const Grid& gr, int count) {
    for (int i = 0; i < count; ++i) g.push_back(gr);
  };
  const double k_c = 0.5 + 1e-5;  // K-quants: float rounding of (x + dm) / d only
  switch (t) {
    case DType::Q4_0:
      for (int64_t i = 0; i < n / kQK; ++i)
        push(symmetric(fp16_to_fp32(static_cast<const BlockQ4_0*>(row)[i].d), -8, 7, legacy_c8, true), kQK);
      break;
    case DType::Q5_0:
      for (int64_t i = 0; i < n / kQK; ++i)
        push(symmetric(fp16_to_fp32(static_cast<const BlockQ5_0*>(row)[i].d), -16, 15, 0.5 + 17 * kHalfEps,
                       true),
             kQK);
      break;
    case DType::Q8_0:
      for (int64_t i = 0; i < n / kQK; ++i)
        push(symmetric(fp16_to_fp32(static_cast<const BlockQ8_0*>(row)[i].d), -127, 127, 0.5 + 128 * kHalfEps,
                       true),
             kQK);
      break;
    case DType::Q4_1: push_affine(static_cast<const BlockQ4_1*>(row), n / kQK, 15, push); break;
    case DType::Q5_1: push_affine(static_cast<const BlockQ5_1*>(row), n / kQK, 31, push); break;
    case DType::Q2_K:
      for (int64_t i = 0; i < n / kQK_K; ++i) {
        const auto& b = static_cast<const BlockQ2_K*>(row)[i];
        for (int j = 0; j < 16; ++j) {
          const double s = fp16_to_fp32(b.d) * (b.scales[j] & 15);
          const double lo = -static_cast<double>(fp16_to_fp32(b.dmin) * static_cast<float>(b.scales[j] >> 4));
          push({s, lo, lo + 3 * s, k_c, 0.0}, 16);
        }
      }
      break;
    case DType::Q3_K:
      for (int64_t i = 0; i < n / kQK_K; ++i) {
        const auto& b = static_cast<const BlockQ3_K*>(row)[i];
        int sc[16];
        quant::unpack_q3_K_scales(b.scales, sc);
        for (int j = 0; j < 16; ++j) push(symmetric(fp16_to_fp32(b.d) * sc[j], -4, 3, k_c), 16);
      }
      break;
    case DType::Q4_K: push_k4(static_cast<const BlockQ4_K*>(row), n / kQK_K, 15, k_c, push); break;
    case DType::Q5_K: push_k4(static_cast<const BlockQ5_K*>(row), n / kQK_K, 31, k_c, push); break;
    case DType::Q6_K:
      for (int64_t i = 0; i < n / kQK_K; ++i) {
        const auto& b = static_cast<const BlockQ6_K*>(row)[i];
        for (int j = 0; j < 16; ++j) push(symmetric(fp16_to_fp32(b.d) * b.scales[j], -32, 31, k_c), 16);
      }
      break;
    case DType::Q8_K:
      for (int64_t i = 0; i < n / kQK_K; ++i)
        push(symmetric(static_cast<const BlockQ8_K*>(row)[i].d, -127, 127, 0.5 + 1e-5), kQK_K);
      break;
    default: break;
  }
  return g;
}

double dist_outside(double x, double lo, double hi) { return x < lo ? lo - x : (x > hi ? x - hi : 0.0); }

class RoundTrip : public ::testing::TestWithParam<DType> {};

TEST_P(RoundTrip, EachValueLandsOnItsNearestLevel) {
  const DType t = GetParam();
  const int64_t n = 64 * kQK_K;
  for (Shape shape :
       {Shape::kGaussian, Shape::kUniform, Shape::kPositive, Shape::kOutliers, Shape::kMixedScales}) {
    const auto x = testing::make_row(shape, n, 1234);
    RowBuffer q(t, n);
    quantize_row(t, x.data(), q.data(), n);
    std::vector<float> y(static_cast<size_t>(n));
    dequantize_row(t, q.data(), y.data(), n);
    if (t == DType::F32 || t == DType::F16 || t == DType::BF16) {
      // Plain conversions: half an ulp of the target format (relative 2^-24, 2^-11, 2^-8).
      const double rel = t == DType::F32 ? 0.0 : (t == DType::F16 ? kHalfEps : 1.0 / 256);
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_LE(std::fabs(double(y[i]) - x[i]), rel * std::fabs(x[i]) + 3e-8)
            << shape_name(shape) << " " << i;
      }
      continue;
    }
    const auto grids = grids_of(t, q.data(), n);
    ASSERT_EQ(grids.size(), static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      const Grid& g = grids[static_cast<size_t>(i)];
      const double err = std::fabs(double(y[i]) - double(x[i]));
      const double allowed = dist_outside(x[i], g.lo, g.hi) + g.c * std::fabs(g.step) + g.abs_slack +
                             1e-6 * (std::fabs(x[i]) + std::fabs(g.lo));
      ASSERT_LE(err, allowed) << testing::type_name(t) << " " << shape_name(shape) << " value " << i
                              << " x=" << x[i] << " y=" << y[i] << " step=" << g.step << " range=[" << g.lo
                              << "," << g.hi << "]";
    }
  }
}

// RMS error over RMS value on unit Gaussian data. The bound for each type is what this
// implementation measures (which is in line with llama.cpp's reference quantizers) plus
// about 10%; a regression in the scale search shows up here first.
TEST_P(RoundTrip, GaussianRmsErrorStaysAtItsLevel) {
  const DType t = GetParam();
  double bound = 0;
  switch (t) {
    case DType::F32: bound = 1e-9; break;
    case DType::F16: bound = 3.0e-4; break;
    case DType::BF16: bound = 2.4e-3; break;
    case DType::Q8_0: bound = 0.0060; break;
    case DType::Q8_K: bound = 0.0078; break;
    case DType::Q6_K: bound = 0.0196; break;
    case DType::Q5_0: bound = 0.047; break;
    case DType::Q5_1: bound = 0.042; break;
    case DType::Q5_K: bound = 0.040; break;
    case DType::Q4_0: bound = 0.095; break;
    case DType::Q4_1: bound = 0.085; break;
    case DType::Q4_K: bound = 0.079; break;
    case DType::Q3_K: bound = 0.166; break;
    case DType::Q2_K: bound = 0.325; break;
    default: FAIL() << "no bound for " << dtype_name(t);
  }
  const int64_t n = 64 * kQK_K;
  const auto x = testing::make_row(Shape::kGaussian, n, 99);
  RowBuffer q(t, n);
  quantize_row(t, x.data(), q.data(), n);
  std::vector<float> y(static_cast<size_t>(n));
  dequantize_row(t, q.data(), y.data(), n);
  double se = 0, sx = 0;
  for (int64_t i = 0; i < n; ++i) {
    se += (double(y[i]) - x[i]) * (double(y[i]) - x[i]);
    sx += double(x[i]) * x[i];
  }
  const double rel = std::sqrt(se / sx);
  RecordProperty("relative_rmse", std::to_string(rel));
  EXPECT_LE(rel, bound) << dtype_name(t);
}

INSTANTIATE_TEST_SUITE_P(AllTypes, RoundTrip, ::testing::ValuesIn(testing::dense_types()),
                         [](const auto& info) { return testing::type_name(info.param); });

}  // namespace
}  // namespace pagoda

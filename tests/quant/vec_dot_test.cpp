// vec_dot(w, quantize(x)) against the dot of the two dequantized rows taken in double.
// Both sides see the same quantized values, so the only difference is float rounding
// in vec_dot: a few roundings per block (scale products, the block's integer sum
// converted and scaled) and one per block in the running float sum. Each rounding is
// at most 2^-24 of a partial sum, and every partial sum is bounded by
//     M = sum_i (|w_i| + A_b) * |x_i|,
// where A_b is the largest |w| of the block: the K-quant min terms are at most about
// one block range, so M also covers the cancellation between d*sum and dmin*bsum.
// So |vec_dot - exact| <= (blocks + 8) * 2^-24 * M; we allow twice that.
#include <gtest/gtest.h>

#include <cmath>

#include "quant/formats.h"
#include "quant_test_util.h"

namespace pagoda {
namespace {

using testing::RowBuffer;
using testing::Shape;

struct DotCase {
  double got;
  double exact;
  double magnitude;
  int64_t blocks;
};

DotCase run_dot(DType t, const std::vector<float>& wf, const std::vector<float>& xf) {
  const auto n = static_cast<int64_t>(wf.size());
  const DType xt = vec_dot_type(t);
  RowBuffer w(t, n);
  RowBuffer x(xt, n);
  quantize_row(t, wf.data(), w.data(), n);
  quantize_row(xt, xf.data(), x.data(), n);
  std::vector<float> wd(wf.size()), xd(xf.size());
  dequantize_row(t, w.data(), wd.data(), n);
  dequantize_row(xt, x.data(), xd.data(), n);
  const int64_t bs = dtype_info(t).block_size;
  double exact = 0, magnitude = 0;
  for (int64_t b = 0; b < n / bs; ++b) {
    double amax = 0;
    for (int64_t i = b * bs; i < (b + 1) * bs; ++i) amax = std::max(amax, std::fabs(double(wd[i])));
    for (int64_t i = b * bs; i < (b + 1) * bs; ++i) {
      exact += double(wd[i]) * double(xd[i]);
      magnitude += (std::fabs(double(wd[i])) + amax) * std::fabs(double(xd[i]));
    }
  }
  return {vec_dot(t, n, w.data(), x.data()), exact, magnitude, n / bs};
}

class VecDot : public ::testing::TestWithParam<DType> {};

TEST_P(VecDot, MatchesDotOfDequantizedRows) {
  const DType t = GetParam();
  for (int64_t n : {int64_t{256}, int64_t{4096}, int64_t{11008}}) {
    for (Shape ws : {Shape::kGaussian, Shape::kPositive, Shape::kMixedScales}) {
      for (Shape xs : {Shape::kGaussian, Shape::kOutliers, Shape::kPositive}) {
        const auto wf = testing::make_row(ws, n, 5 + static_cast<uint32_t>(n));
        const auto xf = testing::make_row(xs, n, 77 + static_cast<uint32_t>(n));
        const DotCase c = run_dot(t, wf, xf);
        const double tol = 2.0 * static_cast<double>(c.blocks + 8) * 0x1p-24 * c.magnitude;
        EXPECT_NEAR(c.got, c.exact, tol)
            << testing::type_name(t) << " n=" << n << " w=" << shape_name(ws) << " x=" << shape_name(xs);
      }
    }
  }
}

// The full pipeline (quantize both, dot) against the float dot of the original rows: the
// error is the quantization noise, small relative to the norms of the rows.
TEST_P(VecDot, TracksTheUnquantizedDot) {
  const DType t = GetParam();
  const int64_t n = 4096;
  const auto wf = testing::make_row(Shape::kGaussian, n, 3);
  const auto xf = testing::make_row(Shape::kGaussian, n, 4);
  double exact = 0, ww = 0, xx = 0;
  for (int64_t i = 0; i < n; ++i) {
    exact += double(wf[i]) * xf[i];
    ww += double(wf[i]) * wf[i];
    xx += double(xf[i]) * xf[i];
  }
  const DotCase c = run_dot(t, wf, xf);
  // Cauchy-Schwarz: |w.x - w'.x'| <= |w-w'||x'| + |w||x-x'|; the relative RMS errors of
  // the coarsest formats here (Q2_K 0.3, Q8_K 0.007) bound that by 0.32 |w||x|.
  EXPECT_NEAR(c.got, exact, 0.32 * std::sqrt(ww * xx)) << testing::type_name(t);
}

INSTANTIATE_TEST_SUITE_P(AllTypes, VecDot, ::testing::ValuesIn(testing::dequantizable_types()),
                         [](const auto& info) { return testing::type_name(info.param); });

}  // namespace
}  // namespace pagoda

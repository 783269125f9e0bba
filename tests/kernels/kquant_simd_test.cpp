// K-quant SIMD bodies against the scalar references, beyond simd_dot_test.cpp: blocks of
// random bits (every level and scale extreme the format can encode, not only what the
// quantizer writes), activations at +-127, every row count and token count around the
// tile kernels' blocking (pairs of rows, 16-row blocks, 8/16-token vectors, 64-token
// chunks, the short-chunk fallback to dots), padded strides, and the Q8_K conversion on
// inputs that stress its rounding and max pick. Tolerance as in simd_dot_test.cpp: the
// integer block sums are exact, only the float combination is reordered.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "base/fp16.h"
#include "kernels/matmul/dot_kernels.h"
#include "quant/blocks.h"
#include "quant/formats.h"

namespace pagoda {
namespace {

struct Param {
  DType type;
  SimdTarget target;
};

std::vector<Param> kquant_params() {
  std::vector<Param> out;
  for (DType t : {DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K})
    for (SimdTarget s : runnable_simd_targets())
      if (s != SimdTarget::kScalar) out.push_back({t, s});
  return out;
}

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  return std::string(dtype_name(info.param.type)) + "_" + simd_target_name(info.param.target);
}

class KQuantSimdTest : public ::testing::TestWithParam<Param> {};

// Offsets of the FP16 super-block scales inside each block type.
void fp16_offsets(DType t, std::vector<size_t>& offs) {
  switch (t) {
    case DType::Q2_K:
      offs = {offsetof(BlockQ2_K, d), offsetof(BlockQ2_K, dmin)};
      break;
    case DType::Q3_K:
      offs = {offsetof(BlockQ3_K, d)};
      break;
    case DType::Q4_K:
      offs = {offsetof(BlockQ4_K, d), offsetof(BlockQ4_K, dmin)};
      break;
    case DType::Q5_K:
      offs = {offsetof(BlockQ5_K, d), offsetof(BlockQ5_K, dmin)};
      break;
    case DType::Q6_K:
      offs = {offsetof(BlockQ6_K, d)};
      break;
    default:
      FAIL();
  }
}

// A weight row of random bytes with finite, moderate FP16 scales.
void random_weight_row(std::mt19937& rng, DType t, int64_t n, uint8_t* dst) {
  const size_t bytes = row_bytes(t, n);
  for (size_t i = 0; i < bytes; ++i) dst[i] = static_cast<uint8_t>(rng());
  std::vector<size_t> offs;
  fp16_offsets(t, offs);
  const size_t block = bytes / static_cast<size_t>(n / kQK_K);
  std::uniform_real_distribution<float> ud(-0.01f, 0.01f);
  for (int64_t b = 0; b < n / kQK_K; ++b)
    for (size_t off : offs) {
      const uint16_t h = fp32_to_fp16(ud(rng));
      std::memcpy(dst + b * block + off, &h, 2);
    }
}

// A Q8_K row with random quants in [-127, 127] (a third of the blocks at +-127 only),
// consistent bsums and a random scale.
void random_q8k_row(std::mt19937& rng, int64_t n, BlockQ8_K* dst) {
  std::uniform_int_distribution<int> q(-127, 127);
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    BlockQ8_K& x = dst[b];
    const bool extreme = rng() % 3 == 0;
    for (int i = 0; i < kQK_K; ++i) x.qs[i] = static_cast<int8_t>(extreme ? (rng() % 2 ? 127 : -127) : q(rng));
    for (int g = 0; g < 16; ++g) {
      int s = 0;
      for (int i = 0; i < 16; ++i) s += x.qs[16 * g + i];
      x.bsums[g] = static_cast<int16_t>(s);
    }
    x.d = std::uniform_real_distribution<float>(0.001f, 0.1f)(rng);
  }
}

double magnitude(DType t, const uint8_t* w, const uint8_t* x, int64_t n) {
  std::vector<float> wd(n), xd(n);
  dequantize_row(t, w, wd.data(), n);
  dequantize_row(DType::Q8_K, x, xd.data(), n);
  double mag = 0;
  for (int64_t i = 0; i < n; ++i) mag += std::fabs(static_cast<double>(wd[i]) * xd[i]);
  return mag;
}

TEST_P(KQuantSimdTest, RegistersSimdBodies) {
  const auto [t, target] = GetParam();
  const DotKernels simd = dot_kernels(t, target);
  const DotKernels ref = dot_kernels(t, SimdTarget::kScalar);
  EXPECT_NE(simd.dot, ref.dot);
  EXPECT_NE(simd.tile, ref.tile);
  EXPECT_NE(simd.quantize_x, ref.quantize_x);
}

TEST_P(KQuantSimdTest, RandomBitsDotAndTile) {
  const auto [t, target] = GetParam();
  const DotKernels simd = dot_kernels(t, target);
  const DotKernels ref = dot_kernels(t, SimdTarget::kScalar);
  std::mt19937 rng(7);
  const int64_t n = 3 * kQK_K;
  const size_t wb = row_bytes(t, n);
  const size_t xb = row_bytes(DType::Q8_K, n);
  // Rows and tokens around every blocking edge; strides padded past the row size.
  for (int64_t rows : {1, 2, 3, 17, 33})
    for (int64_t tokens : {1, 2, 3, 4, 5, 8, 9, 16, 17, 31, 33, 64, 65, 130}) {
      const size_t w_stride = wb + 64, x_stride = xb + 4, y_stride = rows + 3;
      std::vector<uint8_t> w(w_stride * rows), x(x_stride * tokens);
      for (int64_t r = 0; r < rows; ++r) random_weight_row(rng, t, n, w.data() + r * w_stride);
      for (int64_t k = 0; k < tokens; ++k)
        random_q8k_row(rng, n, reinterpret_cast<BlockQ8_K*>(x.data() + k * x_stride));
      std::vector<float> y(y_stride * tokens, -1.0f);
      simd.tile(n, w.data(), w_stride, rows, x.data(), x_stride, tokens, y.data(), y_stride);
      for (int64_t k = 0; k < tokens; ++k) {
        for (int64_t r = 0; r < rows; ++r) {
          const uint8_t* wr = w.data() + r * w_stride;
          const uint8_t* xr = x.data() + k * x_stride;
          const float want = ref.dot(n, wr, xr);
          const double tol = 1e-5 * magnitude(t, wr, xr, n) + 1e-6;
          ASSERT_NEAR(simd.dot(n, wr, xr), want, tol) << "dot row " << r << " token " << k;
          ASSERT_NEAR(y[k * y_stride + r], want, tol)
              << "tile rows=" << rows << " tokens=" << tokens << " row " << r << " token " << k;
        }
        for (int64_t r = rows; r < static_cast<int64_t>(y_stride); ++r)
          ASSERT_EQ(y[k * y_stride + r], -1.0f) << "tile wrote past its rows";
      }
    }
}

// Inputs that stress the Q8_K conversion: ties for the largest |x| with either sign first,
// rounding ties, denormals, a lone huge value, infinities and NaNs, all zero.
TEST_P(KQuantSimdTest, ActivationConversionIsBitExact) {
  const auto [t, target] = GetParam();
  const DotKernels simd = dot_kernels(t, target);
  const DotKernels ref = dot_kernels(t, SimdTarget::kScalar);
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int64_t n = 2 * kQK_K;
  auto check = [&](const std::vector<float>& v, const char* what) {
    std::vector<uint8_t> a(row_bytes(DType::Q8_K, n)), b(a.size());
    simd.quantize_x(v.data(), a.data(), n);
    ref.quantize_x(v.data(), b.data(), n);
    ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size()), 0) << what;
  };
  std::vector<float> v(n);
  for (int rep = 0; rep < 20; ++rep) {
    for (auto& f : v) f = nd(rng);
    const int i = rng() % n, j = rng() % n;
    v[i] = 5.0f;
    v[j] = -5.0f;  // equal magnitude, either may come first
    check(v, "tied max");
    // Values on the .5 grid of iscale: 127 * k / (2 * 127) style ties.
    for (int64_t k = 0; k < n; ++k) v[k] = static_cast<float>(static_cast<int>(rng() % 255) - 127) * 0.5f / 127.0f;
    v[rng() % n] = -1.0f;
    check(v, "rounding ties");
  }
  for (auto& f : v) f = nd(rng) * 1e-39f;  // denormals: iscale overflows
  check(v, "denormals");
  for (auto& f : v) f = nd(rng);
  v[17] = 3e38f;
  check(v, "huge");
  v[17] = std::numeric_limits<float>::infinity();
  check(v, "inf");
  v[17] = std::numeric_limits<float>::quiet_NaN();
  v[300] = -std::numeric_limits<float>::infinity();
  check(v, "nan and -inf");
  for (auto& f : v) f = 0.0f;
  v[400] = -0.0f;
  check(v, "zeros");
  for (auto& f : v) f = std::numeric_limits<float>::quiet_NaN();
  check(v, "all nan");
}

INSTANTIATE_TEST_SUITE_P(AllTargets, KQuantSimdTest, ::testing::ValuesIn(kquant_params()), param_name);

}  // namespace
}  // namespace pagoda

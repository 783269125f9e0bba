// The legacy-format SIMD bodies (legacy_avx2.cpp, legacy_avx512.cpp) beyond what
// simd_dot_test.cpp covers: every row and token remainder of the tile bodies' register
// blocks, odd block counts (the dot bodies step 2 or 4 blocks at a time), outputs inside a
// wider y (nothing outside the tile may be written), raw weight bytes (every nibble, every
// fifth bit, Q8_0's -128), and activation conversion on inputs that stress rounding:
// exact ties, zeros, -0, subnormals, huge values, inf and NaN.
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
#include "q8_dot_test_util.h"

namespace pagoda {
namespace {

struct Param {
  DType type;
  SimdTarget target;
};

std::vector<Param> legacy_params() {
  std::vector<Param> out;
  for (DType t : {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0})
    for (SimdTarget s : runnable_simd_targets())
      if (s != SimdTarget::kScalar) out.push_back({t, s});
  return out;
}

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  return std::string(dtype_name(info.param.type)) + "_" + simd_target_name(info.param.target);
}

class LegacySimdTest : public ::testing::TestWithParam<Param> {};

// Weight rows of raw random bytes (so every quant bit pattern occurs) with the FP16
// fields overwritten by modest random scales (and mins), which keeps every value finite.
std::vector<uint8_t> raw_weights(DType t, int64_t rows, int64_t n, std::mt19937& rng) {
  const size_t rb = row_bytes(t, n);
  const size_t bb = dtype_info(t).type_size;
  std::vector<uint8_t> w(rb * rows);
  for (auto& v : w) v = static_cast<uint8_t>(rng());
  std::uniform_real_distribution<float> ud(-0.05f, 0.05f);
  const bool has_min = t == DType::Q4_1 || t == DType::Q5_1;
  for (size_t off = 0; off < w.size(); off += bb) {
    const uint16_t d = fp32_to_fp16(ud(rng));
    std::memcpy(&w[off], &d, 2);
    if (has_min) {
      const uint16_t m = fp32_to_fp16(ud(rng));
      std::memcpy(&w[off + 2], &m, 2);
    }
  }
  return w;
}

using testing::q8_dot_tolerance;

std::vector<uint8_t> activations(const DotKernels& k, int64_t tokens, int64_t n, std::mt19937& rng) {
  return testing::q8_activations(k, tokens, n, rng);
}

double tolerance(DType t, const uint8_t* w, const uint8_t* x, int64_t n) { return q8_dot_tolerance(t, w, x, n); }

TEST_P(LegacySimdTest, DotOnRawBlocksAndOddBlockCounts) {
  const auto [t, target] = GetParam();
  const DotKernels simd = dot_kernels(t, target);
  const DotKernels ref = dot_kernels(t, SimdTarget::kScalar);
  std::mt19937 rng(7);
  for (int64_t n : {32, 64, 96, 128, 160, 224, 640, 4096 + 96}) {
    const int64_t rows = 9;
    const size_t rb = row_bytes(t, n);
    const std::vector<uint8_t> w = raw_weights(t, rows, n, rng);
    const std::vector<uint8_t> x = activations(ref, 3, n, rng);
    const size_t xb = row_bytes(DType::Q8_0, n);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t k = 0; k < 3; ++k) {
        const uint8_t* wr = w.data() + r * rb;
        const uint8_t* xr = x.data() + k * xb;
        EXPECT_NEAR(simd.dot(n, wr, xr), ref.dot(n, wr, xr), tolerance(t, wr, xr, n)) << "n=" << n << " row " << r;
      }
  }
}

// Integer block sums must be exact: with unit scales every block product and every
// partial sum is a small integer, which float holds exactly in any order.
TEST_P(LegacySimdTest, ExtremeQuantsGiveExactIntegers) {
  const auto [t, target] = GetParam();
  const DotKernels simd = dot_kernels(t, target);
  const DotKernels ref = dot_kernels(t, SimdTarget::kScalar);
  const int64_t n = 256, rows = 20, tokens = 9;
  const size_t rb = row_bytes(t, n), bb = dtype_info(t).type_size, xb = row_bytes(DType::Q8_0, n);
  std::mt19937 rng(5);
  std::vector<uint8_t> w(rb * rows);
  // Rows alternate between all-ones bytes (every nibble 15, every fifth bit set, Q8_0 -1),
  // all-zero bytes (nibble 0, Q8_0 0), 0x80 (Q8_0 -128) and random bytes.
  for (int64_t r = 0; r < rows; ++r) {
    const int kind = static_cast<int>(r % 4);
    for (size_t i = 0; i < rb; ++i)
      w[r * rb + i] = kind == 0 ? 0xff : kind == 1 ? 0x00 : kind == 2 ? 0x80 : static_cast<uint8_t>(rng());
  }
  const uint16_t one = fp32_to_fp16(1.0f);
  for (size_t off = 0; off < w.size(); off += bb) {
    std::memcpy(&w[off], &one, 2);
    if (t == DType::Q4_1 || t == DType::Q5_1) std::memcpy(&w[off + 2], &one, 2);
  }
  // Activations at the ends of their range: +-127 and random, scale 1.
  std::vector<uint8_t> x(xb * tokens);
  for (int64_t k = 0; k < tokens; ++k) {
    auto* blocks = reinterpret_cast<BlockQ8_0*>(x.data() + k * xb);
    for (int64_t b = 0; b < n / 32; ++b) {
      blocks[b].d = one;
      for (int j = 0; j < 32; ++j) {
        const int v = k % 3 == 0 ? 127 : k % 3 == 1 ? -127 : static_cast<int>(rng() % 255) - 127;
        blocks[b].qs[j] = static_cast<int8_t>(v);
      }
    }
  }
  std::vector<float> y(rows * tokens);
  simd.tile(n, w.data(), rb, rows, x.data(), xb, tokens, y.data(), rows);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < tokens; ++k) {
      const float want = ref.dot(n, w.data() + r * rb, x.data() + k * xb);
      EXPECT_EQ(simd.dot(n, w.data() + r * rb, x.data() + k * xb), want) << "dot row " << r << " token " << k;
      EXPECT_EQ(y[k * rows + r], want) << "tile row " << r << " token " << k;
    }
}

// Every rows x tokens remainder of the register blocks, inside a wider output whose
// other entries must stay untouched.
TEST_P(LegacySimdTest, TileShapesAndStrides) {
  const auto [t, target] = GetParam();
  const DotKernels simd = dot_kernels(t, target);
  const DotKernels ref = dot_kernels(t, SimdTarget::kScalar);
  std::mt19937 rng(9);
  const int64_t n = 96;  // 3 blocks: exercises the odd tails too
  const size_t rb = row_bytes(t, n), xb = row_bytes(DType::Q8_0, n);
  const std::vector<uint8_t> w = raw_weights(t, 70, n, rng);
  const std::vector<uint8_t> x = activations(ref, 150, n, rng);
  std::vector<float> want(70 * 150);
  for (int64_t r = 0; r < 70; ++r)
    for (int64_t k = 0; k < 150; ++k) want[k * 70 + r] = ref.dot(n, w.data() + r * rb, x.data() + k * xb);
  const float sentinel = -12345.0f;
  for (int64_t rows : {1, 2, 7, 8, 9, 15, 16, 17, 31, 33, 47, 70})
    for (int64_t tokens : {1, 2, 3, 4, 5, 6, 7, 11, 12, 13, 16, 17, 19, 25, 63, 64, 65, 129, 150}) {
      const size_t ys = static_cast<size_t>(rows) + 3;
      std::vector<float> y(ys * tokens + 5, sentinel);
      simd.tile(n, w.data(), rb, rows, x.data(), xb, tokens, y.data() + 1, ys);
      ASSERT_EQ(y[0], sentinel);
      ASSERT_EQ(y.back(), sentinel);
      for (int64_t k = 0; k < tokens; ++k) {
        for (int64_t r = 0; r < rows; ++r) {
          const float got = y[1 + k * ys + r];
          const double tol = tolerance(t, w.data() + r * rb, x.data() + k * xb, n);
          ASSERT_NEAR(got, want[k * 70 + r], tol)
              << "rows " << rows << " tokens " << tokens << " r " << r << " t " << k;
        }
        for (int64_t r = rows; r < static_cast<int64_t>(ys) && 1 + k * ys + r < y.size(); ++r)
          ASSERT_EQ(y[1 + k * ys + r], sentinel) << "wrote outside the tile: rows " << rows << " tokens " << tokens;
      }
    }
}

class LegacyQuantizeXTest : public ::testing::TestWithParam<SimdTarget> {};

TEST_P(LegacyQuantizeXTest, BitExactOnHardInputs) {
  const DotKernels simd = dot_kernels(DType::Q8_0, GetParam());
  const DotKernels ref = dot_kernels(DType::Q8_0, SimdTarget::kScalar);
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float tiny = std::numeric_limits<float>::denorm_min();
  std::vector<std::vector<float>> blocks;
  blocks.push_back(std::vector<float>(32, 0.0f));   // amax == 0
  blocks.push_back(std::vector<float>(32, -0.0f));  // -0 everywhere
  {
    // amax 127 makes the scale 1, so k + 0.5 are exact ties (even and odd k).
    std::vector<float> b(32);
    for (int j = 0; j < 32; ++j) b[j] = static_cast<float>(j - 16) + 0.5f;
    b[31] = 127.0f;
    blocks.push_back(b);
    for (auto& v : b) v = -v;
    blocks.push_back(b);
  }
  {
    std::vector<float> b(32, 1.0f);
    b[3] = nan;  // ignored by amax, converts to whatever nearest_int makes of it
    b[9] = -2.5f;
    blocks.push_back(b);
  }
  {
    std::vector<float> b(32, 0.5f);
    b[0] = inf;
    b[5] = -inf;
    blocks.push_back(b);
  }
  {
    std::vector<float> b(32, tiny);  // 127 / amax overflows to inf
    b[1] = -3 * tiny;
    b[2] = 0.0f;
    blocks.push_back(b);
  }
  {
    std::vector<float> b(32);
    for (int j = 0; j < 32; ++j) b[j] = (j % 2 ? -1.0f : 1.0f) * 3.0e38f / static_cast<float>(j + 1);
    blocks.push_back(b);
  }
  std::mt19937 rng(13);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (int k = 0; k < 64; ++k) {
    std::vector<float> b(32);
    const float scale = std::ldexp(1.0f, k - 40);
    for (auto& v : b) v = nd(rng) * scale;
    blocks.push_back(b);
  }
  std::vector<float> row;
  for (const auto& b : blocks) row.insert(row.end(), b.begin(), b.end());
  const int64_t n = static_cast<int64_t>(row.size());
  std::vector<uint8_t> got(row_bytes(DType::Q8_0, n)), want(got.size());
  simd.quantize_x(row.data(), got.data(), n);
  ref.quantize_x(row.data(), want.data(), n);
  for (size_t b = 0; b < blocks.size(); ++b)
    EXPECT_EQ(std::memcmp(got.data() + b * sizeof(BlockQ8_0), want.data() + b * sizeof(BlockQ8_0), sizeof(BlockQ8_0)),
              0)
        << "block " << b;
}

std::vector<SimdTarget> simd_targets() {
  std::vector<SimdTarget> out;
  for (SimdTarget s : runnable_simd_targets())
    if (s != SimdTarget::kScalar) out.push_back(s);
  return out;
}

INSTANTIATE_TEST_SUITE_P(AllTargets, LegacySimdTest, ::testing::ValuesIn(legacy_params()), param_name);
INSTANTIATE_TEST_SUITE_P(AllTargets, LegacyQuantizeXTest, ::testing::ValuesIn(simd_targets()),
                         [](const auto& info) { return std::string(simd_target_name(info.param)); });

}  // namespace
}  // namespace pagoda

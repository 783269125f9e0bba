// The W8A8 kernels (w8a8_kernels.h) on every body this machine runs against the scalar
// reference, bit for bit: each output is one exact integer dot scaled the same way, so no
// tolerance is needed, whatever the summation order. Covered: activation conversion
// (padding included, and inputs that stress rounding: ties, zeros, subnormals, huge
// values, inf, NaN), gemv and tile over every row and token remainder of the register
// blocks (1, 7, 16, 64, 130 tokens and more; rows up to 3 panels), rows of multiples and
// odd multiples of 32 and of other lengths, weight bytes over the whole int8 range
// (-128 included), outputs inside a wider y, and the int32 limit of the longest row.
// PAGODA_CPU=avx2 / scalar cap the bodies listed, as for every kernel.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/matmul/matmul.h"
#include "kernels/matmul/w8a8_kernels.h"
#include "quant/w8a8.h"

namespace pagoda {
namespace {

std::vector<SimdTarget> simd_isas() {
  std::vector<SimdTarget> out;
  for (SimdTarget isa : runnable_simd_targets())
    if (isa != SimdTarget::kScalar) out.push_back(isa);
  return out;
}

class W8A8SimdTest : public ::testing::TestWithParam<SimdTarget> {};

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// Quantized activations of `tokens` rows of n values, converted by `k`.
struct Acts {
  std::vector<int8_t> q;
  std::vector<float> scale;
  std::vector<int32_t> sum;
  std::vector<int32_t> staged;
  size_t stride = 0;
  W8A8Acts view() const { return W8A8Acts{q.data(), stride, scale.data(), sum.data(), staged.data()}; }
};

// Rows and staged blocks, as matmul() prepares them.
Acts quantize(const W8A8Kernels& k, const std::vector<float>& x, int64_t tokens, int64_t n) {
  Acts a;
  a.stride = w8a8_act_stride(n);
  a.q.assign(a.stride * tokens, 0);
  a.scale.resize(tokens);
  a.sum.resize(tokens);
  for (int64_t t = 0; t < tokens; ++t)
    a.scale[t] = k.quantize_x(x.data() + t * n, n, a.q.data() + t * a.stride, &a.sum[t]);
  const int64_t block = w8a8_staged_dwords(n) * kW8A8BlockTokens;
  const int64_t blocks = (tokens + kW8A8BlockTokens - 1) / kW8A8BlockTokens;
  a.staged.assign(block * blocks, -1);
  for (int64_t b = 0; b < blocks; ++b)
    w8a8_stage_block(a.view(), b * kW8A8BlockTokens, std::min(kW8A8BlockTokens, tokens - b * kW8A8BlockTokens), n,
                     a.staged.data() + b * block);
  return a;
}

TEST(W8A8Stage, BlocksInterleaveTokensByDwordAndPadWithZeros) {
  const int64_t n = 20, tokens = 3;  // 20 quants: 2 chunks of 16 bytes, 8 dwords per token
  ASSERT_EQ(w8a8_staged_dwords(n), 8);
  std::vector<float> x(tokens * n);
  for (int64_t i = 0; i < tokens * n; ++i) x[i] = static_cast<float>(i % n + 1) * (i < n ? 1.0f : -1.0f);
  const Acts a = quantize(w8a8_kernels(SimdTarget::kScalar), x, tokens, n);
  ASSERT_EQ(a.staged.size(), 8u * 8u);
  for (int64_t j = 0; j < 8; ++j)
    for (int64_t i = 0; i < 8; ++i) {
      int32_t want = 0;
      if (i < tokens) std::memcpy(&want, a.q.data() + i * a.stride + 4 * j, 4);
      EXPECT_EQ(a.staged[j * 8 + i], want) << "dword " << j << " token " << i;
    }
  EXPECT_EQ(a.staged[4 * 8 + 0] >> 24, 127) << "quants 16-19 of token 0 end on its largest value";
  EXPECT_EQ(a.staged[5 * 8 + 0], 0) << "then the row's zero padding";
}

std::vector<float> normal_floats(int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& f : v) f = nd(rng);
  return v;
}

// Random bytes over the whole int8 range (the loader accepts any I8 tensor, so -128 too).
std::vector<int8_t> raw_weights(int64_t rows, int64_t n, std::mt19937& rng) {
  std::vector<int8_t> w(rows * n);
  for (auto& v : w) v = static_cast<int8_t>(rng());
  return w;
}

std::vector<float> row_scales(int64_t rows, std::mt19937& rng) {
  std::uniform_real_distribution<float> ud(1e-4f, 2e-2f);
  std::vector<float> s(rows);
  for (float& v : s) v = ud(rng);
  return s;
}

TEST_P(W8A8SimdTest, QuantizeXMatchesScalarBitForBit) {
  const W8A8Kernels simd = w8a8_kernels(GetParam());
  const W8A8Kernels ref = w8a8_kernels(SimdTarget::kScalar);
  std::mt19937 rng(11);
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int64_t n : {1, 7, 8, 15, 16, 17, 31, 32, 33, 64, 96, 100, 160, 1056, 4099}) {
    std::vector<std::vector<float>> rows;
    rows.push_back(normal_floats(n, rng));
    rows.push_back(std::vector<float>(n, 0.0f));
    std::vector<float> r = normal_floats(n, rng);
    for (int64_t i = 0; i < n; i += 3) r[i] = -0.0f;
    rows.push_back(r);
    // Exact ties: amax 127 makes x * 127 / amax = x, so halves round to even.
    r.assign(n, 0.0f);
    r[0] = 127.0f;
    for (int64_t i = 1; i < n; ++i) r[i] = static_cast<float>(i % 255 - 127) + 0.5f;
    rows.push_back(r);
    r = normal_floats(n, rng);
    for (float& v : r) v *= 1e-40f;  // subnormal inputs; 127 / amax overflows to inf
    rows.push_back(r);
    r = normal_floats(n, rng);
    r[n / 2] = 3e38f;
    rows.push_back(r);
    r = normal_floats(n, rng);
    r[n - 1] = nan;
    rows.push_back(r);
    r = normal_floats(n, rng);
    r[0] = -inf;
    if (n > 2) r[2] = nan;
    rows.push_back(r);
    for (size_t c = 0; c < rows.size(); ++c) {
      const size_t stride = w8a8_act_stride(n);
      ASSERT_EQ(stride % 64, 0u);
      ASSERT_GE(stride, static_cast<size_t>(n));
      // Garbage first: the padding must be written as zeros.
      std::vector<int8_t> qa(stride, 0x55), qb(stride, 0x2a);
      int32_t sa = -1, sb = -2;
      const float da = simd.quantize_x(rows[c].data(), n, qa.data(), &sa);
      const float db = ref.quantize_x(rows[c].data(), n, qb.data(), &sb);
      EXPECT_EQ(bits(da), bits(db)) << "n=" << n << " case " << c;
      EXPECT_EQ(sa, sb) << "n=" << n << " case " << c;
      EXPECT_EQ(qa, qb) << "n=" << n << " case " << c;
    }
  }
}

TEST_P(W8A8SimdTest, GemvMatchesScalarBitForBit) {
  const W8A8Kernels simd = w8a8_kernels(GetParam());
  const W8A8Kernels ref = w8a8_kernels(SimdTarget::kScalar);
  std::mt19937 rng(3);
  for (int64_t n : {32, 64, 96, 160, 2048 + 96, 7, 100, 1000}) {
    for (int64_t rows : {1, 3, 4, 5, 9, 33}) {
      const std::vector<int8_t> w = raw_weights(rows, n, rng);
      const std::vector<float> ws = row_scales(rows, rng);
      const Acts x = quantize(ref, normal_floats(n, rng), 1, n);
      std::vector<float> ya(rows), yb(rows);
      simd.gemv(n, w.data(), n, ws.data(), rows, x.view(), ya.data());
      ref.gemv(n, w.data(), n, ws.data(), rows, x.view(), yb.data());
      for (int64_t r = 0; r < rows; ++r) ASSERT_EQ(bits(ya[r]), bits(yb[r])) << "n=" << n << " rows=" << rows << " r=" << r;
    }
  }
}

TEST_P(W8A8SimdTest, TileMatchesScalarInsideAWiderOutput) {
  const W8A8Kernels simd = w8a8_kernels(GetParam());
  const W8A8Kernels ref = w8a8_kernels(SimdTarget::kScalar);
  std::mt19937 rng(5);
  const float kSentinel = -12345.0f;
  for (int64_t n : {32, 96, 160, 1056, 7, 100}) {
    for (int64_t tokens : {1, 2, 3, 7, 8, 9, 16, 17, 20, 64, 130, 300}) {
      for (int64_t rows : {1, 7, 8, 15, 16, 17, 31, 32, 33, 50}) {
        if (n >= 1056 && rows > 17 && tokens > 20) continue;  // the scalar reference is slow
        const std::vector<int8_t> w = raw_weights(rows, n, rng);
        const std::vector<float> ws = row_scales(rows, rng);
        const Acts x = quantize(ref, normal_floats(n * tokens, rng), tokens, n);
        // Column offset 3 in a y of rows + 5 columns: nothing outside the block may change.
        const size_t ys = rows + 5;
        std::vector<float> ya(ys * tokens, kSentinel), yb(ys * tokens, kSentinel);
        simd.tile(n, w.data(), n, ws.data(), rows, x.view(), tokens, ya.data() + 3, ys);
        ref.tile(n, w.data(), n, ws.data(), rows, x.view(), tokens, yb.data() + 3, ys);
        for (size_t i = 0; i < ya.size(); ++i)
          ASSERT_EQ(bits(ya[i]), bits(yb[i])) << "n=" << n << " tokens=" << tokens << " rows=" << rows << " token "
                                              << i / ys << " column " << i % ys;
      }
    }
  }
}

// The longest row the loader accepts with every product at its extreme: the exact sums
// reach +-2.13e9, just inside int32 (the VNNI body's offset terms wrap on the way).
TEST_P(W8A8SimdTest, ExtremeProductsOverTheLongestRow) {
  const W8A8Kernels simd = w8a8_kernels(GetParam());
  const W8A8Kernels ref = w8a8_kernels(SimdTarget::kScalar);
  const int64_t n = kW8A8MaxCols, rows = 3, tokens = 3;
  std::vector<int8_t> w(rows * n);
  for (int64_t i = 0; i < n; ++i) {
    w[i] = 127;
    w[n + i] = -128;
    w[2 * n + i] = static_cast<int8_t>(i % 2 ? -128 : 127);
  }
  const std::vector<float> ws(rows, 1.0f);
  std::vector<float> xf(tokens * n);
  for (int64_t i = 0; i < n; ++i) {
    xf[i] = 1.0f;  // all 127
    xf[n + i] = -1.0f;  // all -127
    xf[2 * n + i] = i % 2 ? -1.0f : 1.0f;
  }
  const Acts x = quantize(ref, xf, tokens, n);
  ASSERT_EQ(x.sum[0], 127 * n);
  std::vector<float> ya(rows * tokens), yb(rows * tokens);
  simd.tile(n, w.data(), n, ws.data(), rows, x.view(), tokens, ya.data(), rows);
  ref.tile(n, w.data(), n, ws.data(), rows, x.view(), tokens, yb.data(), rows);
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t r = 0; r < rows; ++r) {
      int64_t exact = 0;
      for (int64_t i = 0; i < n; ++i) exact += static_cast<int64_t>(w[r * n + i]) * x.q[t * x.stride + i];
      ASSERT_LT(std::llabs(exact), int64_t{1} << 31);
      EXPECT_EQ(yb[t * rows + r], static_cast<float>(exact) * (1.0f * x.scale[t])) << "reference, row " << r
                                                                                 << " token " << t;
      EXPECT_EQ(bits(ya[t * rows + r]), bits(yb[t * rows + r])) << "tile, row " << r << " token " << t;
      float g = 0;
      const Acts xt = quantize(ref, std::vector<float>(xf.begin() + t * n, xf.begin() + (t + 1) * n), 1, n);
      simd.gemv(n, w.data() + r * n, n, ws.data() + r, 1, xt.view(), &g);
      EXPECT_EQ(bits(g), bits(yb[t * rows + r])) << "gemv, row " << r << " token " << t;
    }
}

INSTANTIATE_TEST_SUITE_P(Isas, W8A8SimdTest, ::testing::ValuesIn(simd_isas()),
                         [](const auto& info) { return std::string(simd_target_name(info.param)); });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(W8A8SimdTest);

// matmul() on a W8A8 view (the path the model takes) equals the scalar reference bit for
// bit with any number of threads and tokens (decode's gemv, prefill's tile), and its
// dequantized embedding rows are q * scale.
TEST(W8A8Matmul, MatchesScalarReferenceAndDequantizes) {
  std::mt19937 rng(9);
  for (int64_t cols : {96, 160, 640}) {
    const int64_t rows = 77;
    const std::vector<float> wf = normal_floats(rows * cols, rng);
    std::vector<int8_t> wq(rows * cols);
    std::vector<float> scales(rows);
    for (int64_t r = 0; r < rows; ++r) scales[r] = quantize_row_w8a8(&wf[r * cols], &wq[r * cols], cols);
    WeightView w;
    w.type = DType::I8;
    w.rows = rows;
    w.cols = cols;
    w.row_stride = cols;
    w.data = reinterpret_cast<const uint8_t*>(wq.data());
    w.row_scales = scales.data();
    const W8A8Kernels ref = w8a8_kernels(SimdTarget::kScalar);
    for (int threads : {1, 3})
      for (int64_t tokens : {1, 5, 70}) {
        ThreadPool pool(threads);
        const std::vector<float> x = normal_floats(tokens * cols, rng);
        std::vector<float> y(tokens * rows);
        matmul(w, x.data(), tokens, y.data(), pool);
        const Acts xa = quantize(ref, x, tokens, cols);
        std::vector<float> want(tokens * rows);
        ref.tile(cols, wq.data(), cols, scales.data(), rows, xa.view(), tokens, want.data(), rows);
        for (size_t i = 0; i < y.size(); ++i)
          ASSERT_EQ(bits(y[i]), bits(want[i])) << "cols " << cols << " threads " << threads << " tokens " << tokens;
      }
    std::vector<float> row(cols);
    dequantize_weight_row(w, 5, row.data());
    for (int64_t i = 0; i < cols; ++i) EXPECT_EQ(row[i], scales[5] * static_cast<float>(wq[5 * cols + i]));
  }
}

}  // namespace
}  // namespace pagoda

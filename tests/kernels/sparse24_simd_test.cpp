// The 2:4 sparse formats' kernels (sparse24_avx512vbmi.cpp, sparse24_tile.cpp) against
// the scalar references on every runnable target: raw random bytes (every code, valid or
// not, every quant), odd block counts, exact integers at unit scales, the tile and the
// matmul path that expands each thread's rows once.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "base/fp16.h"
#include "base/thread_pool.h"
#include "kernels/matmul/dot_kernels.h"
#include "kernels/matmul/matmul.h"
#include "kernels/matmul/packed_weights.h"
#include "quant/blocks.h"
#include "quant/formats.h"
#include "quant/sparse24.h"
#include "q8_dot_test_util.h"

namespace pagoda {
namespace {

struct Param {
  DType type;
  SimdTarget target;
};

std::vector<Param> params() {
  std::vector<Param> out;
  for (DType t : {DType::Q8_0_S24, DType::Q4_0_S24})
    for (SimdTarget s : runnable_simd_targets()) out.push_back({t, s});
  return out;
}

class Sparse24SimdTest : public ::testing::TestWithParam<Param> {};

// Raw random bytes with modest FP16 scales (so every code and quant occurs, values finite).
std::vector<uint8_t> raw_weights(DType t, int64_t rows, int64_t n, std::mt19937& rng, bool unit = false) {
  const size_t bb = dtype_info(t).type_size;
  std::vector<uint8_t> w(row_bytes(t, n) * rows);
  for (auto& v : w) v = static_cast<uint8_t>(rng());
  std::uniform_real_distribution<float> ud(-0.05f, 0.05f);
  for (size_t off = 0; off < w.size(); off += bb) {
    const uint16_t d = fp32_to_fp16(unit ? 1.0f : ud(rng));
    std::memcpy(&w[off], &d, 2);
  }
  return w;
}

std::vector<uint8_t> activations(int64_t tokens, int64_t n, std::mt19937& rng) {
  return testing::q8_activations(dot_kernels(DType::Q8_0, SimdTarget::kScalar), tokens, n, rng);
}

double tolerance(DType t, const uint8_t* w, const uint8_t* x, int64_t n) { return testing::q8_dot_tolerance(t, w, x, n); }

TEST_P(Sparse24SimdTest, DotMatchesTheReferenceOnRawBlocksAndOddBlockCounts) {
  const auto [t, target] = GetParam();
  const DotKernels simd = dot_kernels(t, target);
  const DotKernels ref = dot_kernels(t, SimdTarget::kScalar);
  std::mt19937 rng(7);
  for (int64_t n : {64, 128, 192, 640, 4096 + 64}) {
    const int64_t rows = 9;
    const size_t rb = row_bytes(t, n), xb = row_bytes(DType::Q8_0, n);
    const auto w = raw_weights(t, rows, n, rng);
    const auto x = activations(3, n, rng);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t k = 0; k < 3; ++k) {
        const uint8_t* wr = w.data() + r * rb;
        const uint8_t* xr = x.data() + k * xb;
        const float want = ref.dot(n, wr, xr);
        EXPECT_NEAR(simd.dot(n, wr, xr), want, tolerance(t, wr, xr, n)) << "n=" << n << " row " << r;
        float rows_out = 0;
        simd.dot_rows(n, wr, rb, 1, xr, &rows_out);
        EXPECT_NEAR(rows_out, want, tolerance(t, wr, xr, n));
      }
  }
}

// With unit scales every partial sum is a small integer, exact in float in any order: the
// gathers must pick exactly the reference's activations.
TEST_P(Sparse24SimdTest, UnitScalesGiveTheReferencesExactIntegers) {
  const auto [t, target] = GetParam();
  const DotKernels simd = dot_kernels(t, target);
  const DotKernels ref = dot_kernels(t, SimdTarget::kScalar);
  std::mt19937 rng(5);
  const int64_t n = 512, rows = 16, tokens = 5;
  const size_t rb = row_bytes(t, n), xb = row_bytes(DType::Q8_0, n);
  const auto w = raw_weights(t, rows, n, rng, /*unit=*/true);
  std::vector<uint8_t> x(xb * tokens);
  const uint16_t one = fp32_to_fp16(1.0f);
  for (int64_t k = 0; k < tokens; ++k) {
    auto* blocks = reinterpret_cast<BlockQ8_0*>(x.data() + k * xb);
    for (int64_t b = 0; b < n / 32; ++b) {
      blocks[b].d = one;
      for (auto& q : blocks[b].qs) q = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
    }
  }
  std::vector<float> y(rows * tokens);
  simd.tile(n, w.data(), rb, rows, x.data(), xb, tokens, y.data(), rows);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < tokens; ++k) {
      const float want = ref.dot(n, w.data() + r * rb, x.data() + k * xb);
      ASSERT_EQ(simd.dot(n, w.data() + r * rb, x.data() + k * xb), want) << r << " " << k;
      ASSERT_EQ(y[k * rows + r], want) << "tile " << r << " " << k;
    }
}

TEST_P(Sparse24SimdTest, TileWritesOnlyItsOutputsAndMatchesTheReference) {
  const auto [t, target] = GetParam();
  const DotKernels simd = dot_kernels(t, target);
  const DotKernels ref = dot_kernels(t, SimdTarget::kScalar);
  std::mt19937 rng(9);
  const int64_t n = 320, rows = 21, tokens = 13, y_stride = 40;
  const size_t rb = row_bytes(t, n), xb = row_bytes(DType::Q8_0, n);
  const auto w = raw_weights(t, rows, n, rng);
  const auto x = activations(tokens, n, rng);
  std::vector<float> y(y_stride * tokens, -7.0f);
  simd.tile(n, w.data(), rb, rows, x.data(), xb, tokens, y.data(), y_stride);
  for (int64_t k = 0; k < tokens; ++k)
    for (int64_t r = 0; r < y_stride; ++r) {
      const float got = y[k * y_stride + r];
      if (r >= rows) {
        ASSERT_EQ(got, -7.0f) << "wrote outside the tile at " << r;
        continue;
      }
      const uint8_t* wr = w.data() + r * rb;
      const uint8_t* xr = x.data() + k * xb;
      EXPECT_NEAR(got, ref.dot(n, wr, xr), tolerance(t, wr, xr, n)) << r << " " << k;
    }
}

// The expansion matmul's prefill runs on gives the scalar expansion's bytes on every target.
TEST_P(Sparse24SimdTest, ExpandedRowsAreTheScalarExpansionsBytes) {
  const auto [t, target] = GetParam();
  const DotKernels simd = dot_kernels(t, target);
  ASSERT_NE(simd.expand_row, nullptr);
  std::mt19937 rng(13);
  const int64_t n = 64 * 37;
  const auto w = raw_weights(t, 1, n, rng);
  std::vector<uint8_t> a(row_bytes(simd.expanded, n), 0x5a), b(row_bytes(simd.expanded, n), 0xa5);
  simd.expand_row(w.data(), a.data(), n);
  if (t == DType::Q8_0_S24) expand_row_q8_0_s24(w.data(), b.data(), n);
  else expand_row_q4_0_s24(w.data(), b.data(), n);
  ASSERT_EQ(a, b);
}

// Prefill's fused expansion into the dense format's panels writes what packing the
// scalar expansions writes: odd sparse block counts (Q4_0's two-block runs), a partial
// last panel, raw codes including damaged ones.
TEST_P(Sparse24SimdTest, ExpandedPanelsArePanelsOfTheScalarExpansions) {
  const auto [t, target] = GetParam();
  const DotKernels simd = dot_kernels(t, target);
  if (simd.expand_panels == nullptr) GTEST_SKIP() << simd_target_name(target) << " expands rows, not panels";
  std::mt19937 rng(17);
  for (const int64_t blocks : {1, 2, 3, 14}) {
    const int64_t rows = 37, n = 64 * blocks;
    const auto w = raw_weights(t, rows, n, rng);
    const size_t sb = row_bytes(t, n), db = row_bytes(simd.expanded, n);
    std::vector<uint8_t> dense(db * rows);
    for (int64_t r = 0; r < rows; ++r) {
      if (t == DType::Q8_0_S24) expand_row_q8_0_s24(w.data() + r * sb, dense.data() + r * db, n);
      else expand_row_q4_0_s24(w.data() + r * sb, dense.data() + r * db, n);
    }
    const size_t bytes = packed_bytes(simd.expanded, rows, n);
    std::vector<uint8_t> want(bytes, 0x5a), got(bytes, 0xa5);
    pack_panels(simd.expanded, dense.data(), db, rows, n, 0, (rows + kPanelRows - 1) / kPanelRows, want.data());
    simd.expand_panels(w.data(), sb, rows, n, got.data());
    ASSERT_EQ(got, want) << dtype_name(t) << " " << blocks << " blocks";
  }
}

// matmul expands each thread's rows once and runs the dense tile; decode runs the dot.
TEST(Sparse24Matmul, PrefillAndDecodeMatchTheReference) {
  std::mt19937 rng(3);
  ThreadPool pool(2);
  for (DType t : {DType::Q8_0_S24, DType::Q4_0_S24}) {
    const int64_t rows = 80, cols = 256, tokens = 70;
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> wf(rows * cols), x(tokens * cols);
    for (auto& v : wf) v = nd(rng);
    for (auto& v : x) v = nd(rng);
    const size_t rb = row_bytes(t, cols);
    std::vector<uint8_t> w(rb * rows);
    for (int64_t r = 0; r < rows; ++r) quantize_row(t, wf.data() + r * cols, w.data() + r * rb, cols);
    WeightView view;
    view.type = t;
    view.rows = rows;
    view.cols = cols;
    view.data = w.data();
    view.row_stride = rb;
    std::vector<float> y(tokens * rows), y1(rows);
    matmul(view, x.data(), tokens, y.data(), pool);
    const size_t xb = row_bytes(DType::Q8_0, cols);
    std::vector<uint8_t> xq(xb);
    for (int64_t k = 0; k < tokens; ++k) {
      quantize_activation_row(DType::Q8_0, x.data() + k * cols, xq.data(), cols);
      if (k == tokens - 1) matmul(view, x.data() + k * cols, 1, y1.data(), pool);
      for (int64_t r = 0; r < rows; ++r) {
        const float want = vec_dot(t, cols, w.data() + r * rb, xq.data());
        const double tol = 1e-4 * (std::fabs(want) + 1.0);
        ASSERT_NEAR(y[k * rows + r], want, tol) << dtype_name(t) << " " << r << " " << k;
        if (k == tokens - 1) {
          ASSERT_NEAR(y1[r], want, tol) << dtype_name(t) << " decode " << r;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Targets, Sparse24SimdTest, ::testing::ValuesIn(params()), [](const auto& info) {
  return std::string(dtype_name(info.param.type)) + "_" + simd_target_name(info.param.target);
});

}  // namespace
}  // namespace pagoda

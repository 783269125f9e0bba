// Matrices repacked into 16-row panels (kernels/matmul/packed_weights.h): the panel GEMV and tile
// against the scalar reference dot, the tile against the GEMV bit for bit (a row's result
// must not depend on its batch), and matmul / matmul_shared_input through packed views
// against the row-major path. Runs where the CPU has AVX-512 VNNI, else skips saying so.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "base/aligned_buffer.h"
#include "base/thread_pool.h"
#include "kernels/matmul/dot_kernels.h"
#include "kernels/matmul/matmul.h"
#include "kernels/matmul/packed_weights.h"
#include "quant/blocks.h"
#include "quant/formats.h"

namespace pagoda {
namespace {

class PackedTest : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    if (packed_kernels_avx512(GetParam()) == nullptr)
      GTEST_SKIP() << "this CPU has no AVX-512 VNNI: matrices are never repacked here";
  }
};

std::vector<float> random_row(std::mt19937& rng, int64_t n) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = nd(rng);
  for (int64_t i = 0; i < n; i += 97) v[static_cast<size_t>(i)] *= 8.0f;
  return v;
}

struct Matrix {
  int64_t rows, cols;
  size_t stride;
  std::vector<uint8_t> w;
  AlignedBuffer packed;
};

Matrix make_matrix(DType t, int64_t rows, int64_t cols, std::mt19937& rng) {
  Matrix m{rows, cols, row_bytes(t, cols), {}, AlignedBuffer(packed_bytes(t, rows, cols))};
  m.w.resize(m.stride * static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) quantize_row(t, random_row(rng, cols).data(), m.w.data() + r * m.stride, cols);
  pack_panels(t, m.w.data(), m.stride, rows, cols, 0, (rows + kPanelRows - 1) / kPanelRows, m.packed.data());
  return m;
}

std::vector<uint8_t> activations(DType t, int64_t tokens, int64_t cols, std::mt19937& rng) {
  const DType xt = vec_dot_type(t);
  const size_t xb = row_bytes(xt, cols);
  std::vector<uint8_t> x(xb * static_cast<size_t>(tokens));
  for (int64_t i = 0; i < tokens; ++i) quantize_activation_row(xt, random_row(rng, cols).data(), x.data() + i * xb, cols);
  return x;
}

// The reference dot and a bound on its rounding: sum |w| |x| over the dequantized values.
double magnitude(DType t, const uint8_t* w, const uint8_t* x, int64_t n) {
  std::vector<float> wf(static_cast<size_t>(n)), xf(static_cast<size_t>(n));
  dequantize_row(t, w, wf.data(), n);
  dequantize_row(vec_dot_type(t), x, xf.data(), n);
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += std::fabs(static_cast<double>(wf[i]) * xf[i]);
  return s;
}

// matmul_shared_input over ws equals a matmul of each matrix alone, bit for bit; returns
// the fused outputs.
std::vector<std::vector<float>> expect_fused_equals_separate(const std::vector<const WeightView*>& ws,
                                                             const std::vector<float>& x, ThreadPool& pool,
                                                             const std::string& what) {
  std::vector<std::vector<float>> fused;
  std::vector<float*> ys;
  for (const WeightView* w : ws) {
    fused.emplace_back(static_cast<size_t>(w->rows));
    ys.push_back(fused.back().data());
  }
  matmul_shared_input(ws, x.data(), 1, ys, pool);
  for (size_t i = 0; i < ws.size(); ++i) {
    std::vector<float> y(static_cast<size_t>(ws[i]->rows));
    matmul(*ws[i], x.data(), 1, y.data(), pool);
    EXPECT_EQ(std::memcmp(fused[i].data(), y.data(), sizeof(float) * y.size()), 0) << what << ", matrix " << i;
  }
  return fused;
}

TEST_P(PackedTest, GemvMatchesTheScalarDotForEveryRowAndPartialPanel) {
  const DType t = GetParam();
  const PackedKernels* k = packed_kernels_avx512(t);
  std::mt19937 rng(3);
  for (int64_t blocks : {1, 3, 20, 69}) {
    for (int64_t rows : {1, 15, 16, 37}) {
      const int64_t n = blocks * dtype_info(t).block_size;
      Matrix m = make_matrix(t, rows, n, rng);
      const std::vector<uint8_t> x = activations(t, 1, n, rng);
      std::vector<float> y(static_cast<size_t>(rows) + 1, -7.0f);
      k->gemv(n, m.packed.data(), rows, x.data(), y.data());
      for (int64_t r = 0; r < rows; ++r) {
        const uint8_t* wr = m.w.data() + r * m.stride;
        const double want = vec_dot(t, n, wr, x.data());
        ASSERT_NEAR(y[r], want, 1e-5 * magnitude(t, wr, x.data(), n) + 1e-6)
            << "n=" << n << " rows=" << rows << " row " << r;
      }
      ASSERT_EQ(y[rows], -7.0f) << "wrote past the last row, n=" << n << " rows=" << rows;
    }
  }
}

TEST_P(PackedTest, TileEqualsGemvBitForBitForEveryTokenCount) {
  const DType t = GetParam();
  const PackedKernels* k = packed_kernels_avx512(t);
  std::mt19937 rng(4);
  const int64_t n = 20 * dtype_info(t).block_size, rows = 37, max_tokens = 70;
  Matrix m = make_matrix(t, rows, n, rng);
  const std::vector<uint8_t> x = activations(t, max_tokens, n, rng);
  const size_t xb = row_bytes(vec_dot_type(t), n);
  std::vector<float> alone(static_cast<size_t>(rows * max_tokens));
  for (int64_t tk = 0; tk < max_tokens; ++tk) k->gemv(n, m.packed.data(), rows, x.data() + tk * xb, &alone[tk * rows]);
  // Every count from 1 to past one staging of 64, and a y stride wider than the rows.
  const size_t ys = rows + 3;
  for (int64_t tokens = 1; tokens <= max_tokens; ++tokens) {
    std::vector<float> y(ys * static_cast<size_t>(tokens), -7.0f);
    k->tile(n, m.packed.data(), rows, x.data(), xb, tokens, y.data(), ys);
    for (int64_t tk = 0; tk < tokens; ++tk) {
      for (int64_t r = 0; r < rows; ++r)
        ASSERT_EQ(std::memcmp(&y[tk * ys + r], &alone[tk * rows + r], sizeof(float)), 0)
            << "tokens=" << tokens << " token " << tk << " row " << r;
      for (size_t r = rows; r < ys; ++r) ASSERT_EQ(y[tk * ys + r], -7.0f) << "wrote past the rows";
    }
  }
}

TEST_P(PackedTest, MatmulThroughPanelsMatchesTheRowMajorPath) {
  const DType t = GetParam();
  ThreadPool pool(3);
  std::mt19937 rng(5);
  const int64_t rows = 100, cols = 2 * kQK_K;
  Matrix m = make_matrix(t, rows, cols, rng);
  WeightView plain{t, rows, cols, m.stride, m.w.data(), nullptr, nullptr};
  WeightView packed = plain;
  packed.packed = m.packed.data();
  for (int64_t tokens : {1, 5, 64, 130}) {
    const std::vector<float> x = random_row(rng, tokens * cols);
    std::vector<float> a(static_cast<size_t>(tokens * rows)), b(a.size());
    matmul(plain, x.data(), tokens, a.data(), pool);
    matmul(packed, x.data(), tokens, b.data(), pool);
    for (size_t i = 0; i < a.size(); ++i)
      ASSERT_NEAR(b[i], a[i], 1e-4 * (std::fabs(a[i]) + std::sqrt(static_cast<double>(cols))))
          << "tokens=" << tokens << " output " << i;
  }
}

TEST_P(PackedTest, FusedDecodeGroupEqualsSeparateCallsBitForBit) {
  const DType t = GetParam();
  ThreadPool pool(2);
  std::mt19937 rng(6);
  const int64_t cols = 4 * dtype_info(t).block_size;
  Matrix q = make_matrix(t, 64, cols, rng), k = make_matrix(t, 16, cols, rng), v = make_matrix(t, 16, cols, rng);
  auto view = [&](Matrix& m) {
    WeightView w{t, m.rows, m.cols, m.stride, m.w.data(), nullptr, nullptr};
    w.packed = m.packed.data();
    return w;
  };
  const WeightView wq = view(q), wk = view(k), wv = view(v);
  expect_fused_equals_separate({&wq, &wk, &wv}, random_row(rng, cols), pool, std::string(dtype_name(t)));
}

// Experts in panels through matmul_jobs (rows not a whole number of panels included): each
// equals its own matmul bit for bit, decode and batched.
TEST_P(PackedTest, ExpertJobsThroughPanelsEqualSeparateCallsBitForBit) {
  const DType t = GetParam();
  ThreadPool pool(2);
  std::mt19937 rng(8);
  const int64_t cols = 4 * dtype_info(t).block_size;
  std::vector<Matrix> ms;
  for (int64_t rows : {48, 37, 16}) ms.push_back(make_matrix(t, rows, cols, rng));
  std::vector<WeightView> ws;
  for (Matrix& m : ms) {
    WeightView w{t, m.rows, m.cols, m.stride, m.w.data(), nullptr, nullptr};
    w.packed = m.packed.data();
    ws.push_back(w);
  }
  for (int64_t tokens : {1, 9}) {
    std::vector<std::vector<float>> x, sep, grouped;
    std::vector<MatmulJob> jobs;
    for (const WeightView& w : ws) {
      x.push_back(random_row(rng, tokens * cols));
      sep.emplace_back(static_cast<size_t>(tokens * w.rows));
      grouped.emplace_back(static_cast<size_t>(tokens * w.rows), -1.0f);
    }
    for (size_t i = 0; i < ws.size(); ++i) {
      matmul(ws[i], x[i].data(), tokens, sep[i].data(), pool);
      jobs.push_back(MatmulJob{&ws[i], x[i].data(), tokens, grouped[i].data()});
    }
    matmul_jobs(jobs, pool);
    for (size_t i = 0; i < ws.size(); ++i)
      EXPECT_EQ(std::memcmp(sep[i].data(), grouped[i].data(), sizeof(float) * sep[i].size()), 0)
          << dtype_name(t) << " job " << i << ", " << tokens << " tokens";
  }
}

// Qwen2's Q/K in Q5_0 beside V in Q8_0, Q4_K_M's Q/K in Q4_K beside V in Q6_K: one
// activation conversion and one region, each matrix through its own kernels, packed or not.
TEST(PackedMixedGroup, FusedDecodeGroupOfFormatsSharingAnActivationTypeEqualsSeparateCalls) {
  ThreadPool pool(2);
  std::mt19937 rng(7);
  for (const auto& [qk, v] : {std::pair{DType::Q5_0, DType::Q8_0}, std::pair{DType::Q4_K, DType::Q6_K}}) {
    for (bool use_packed : {false, true}) {
      if (use_packed && (packed_kernels_avx512(qk) == nullptr || packed_kernels_avx512(v) == nullptr)) continue;
      const int64_t cols = 2 * kQK_K;
      Matrix mq = make_matrix(qk, 64, cols, rng), mk = make_matrix(qk, 16, cols, rng), mv = make_matrix(v, 32, cols, rng);
      auto view = [&](Matrix& m, DType t) {
        WeightView w{t, m.rows, m.cols, m.stride, m.w.data(), nullptr, nullptr};
        if (use_packed) w.packed = m.packed.data();
        return w;
      };
      const WeightView wq = view(mq, qk), wk = view(mk, qk), wv = view(mv, v);
      const std::vector<float> x = random_row(rng, cols);
      const std::string what =
          std::string(dtype_name(qk)) + "+" + std::string(dtype_name(v)) + (use_packed ? " packed" : " row-major");
      const std::vector<float> yv = expect_fused_equals_separate({&wq, &wk, &wv}, x, pool, what)[2];
      // And the results are the matrices' own, not a neighbour's: the scalar dot on the
      // same activations quantized by the reference (1e-3 of the magnitude covers a quant
      // that the SIMD conversion rounds the other way).
      const DType xt = vec_dot_type(v);
      std::vector<uint8_t> xq(row_bytes(xt, cols));
      quantize_activation_row(xt, x.data(), xq.data(), cols);
      for (int64_t r = 0; r < 32; ++r) {
        const uint8_t* wr = mv.w.data() + r * mv.stride;
        EXPECT_NEAR(yv[r], vec_dot(v, cols, wr, xq.data()), 1e-3 * magnitude(v, wr, xq.data(), cols) + 1e-6)
            << what << " V row " << r;
      }
    }
  }
}

TEST(PackedLayout, PanelsTakeTheBytesOfTheirRows) {
  for (DType t : {DType::Q4_0, DType::Q5_0, DType::Q8_0, DType::Q6_K}) {
    const int64_t cols = t == DType::Q6_K ? 512 : 640;
    EXPECT_TRUE(has_packed_layout(t));
    EXPECT_EQ(packed_bytes(t, 64, cols), row_bytes(t, cols) * 64) << dtype_name(t);
    EXPECT_EQ(packed_bytes(t, 65, cols), row_bytes(t, cols) * 80) << dtype_name(t);
  }
  // Q4_K's scales and mins are unpacked to bytes: 2368 bytes per 16 rows of 256 values.
  EXPECT_EQ(packed_bytes(DType::Q4_K, 32, 512), size_t{2368} * 2 * 2);
  // Q6_K keeps its blocks' d in pairs: an odd block count takes one line more than the rows.
  EXPECT_EQ(packed_bytes(DType::Q6_K, 16, 768), row_bytes(DType::Q6_K, 768) * 16 + 32);
  EXPECT_FALSE(has_packed_layout(DType::Q5_K));
}

// The AMX tiles: every output equal to the VNNI GEMV's bit for bit (the integer dots are
// exact either way and the float steps run in the GEMV's order), for every token count
// through two stagings of 64 (full groups of 16, a remainder, both chunks of 32),
// partial panels, one block and many, and activation rows with a gap between them.
// The Q8_0 / Q4_0 panels byte for byte as packed_layout.h defines them (the AVX-512
// packer's transposes checked against the definition, not against the scalar packer):
// block b of panel p at b x (64 x regs + 32); register j, lane r = bytes 4j..4j+3 of row
// 16p + r's block b, XORed with 0x80 for Q8_0; then the 16 rows' FP16 scales; rows past
// the matrix all zero. Odd block counts leave a partial run of blocks; only panels
// [p0, p1) are written.
TEST(PackedLayout, LegacyPanelsHoldEachRowsQuantDwordsInItsLaneAndItsScaleAfterThem) {
  std::mt19937 rng(11);
  struct Case {
    DType t;
    int regs;
    uint8_t flip;
    size_t block, d_at;  // a file block's bytes and its scale's offset; quants at 2
  };
  for (const Case c : {Case{DType::Q8_0, 8, 0x80, sizeof(BlockQ8_0), 0}, Case{DType::Q4_0, 4, 0, sizeof(BlockQ4_0), 0}}) {
    for (const int64_t nb : {1, 3, 5, 8}) {
      const int64_t rows = 37, cols = nb * kQK, p0 = 1, p1 = 3;
      const size_t stride = row_bytes(c.t, cols);
      std::vector<uint8_t> w(stride * rows);
      for (int64_t r = 0; r < rows; ++r) quantize_row(c.t, random_row(rng, cols).data(), w.data() + r * stride, cols);
      const size_t block_bytes = 64 * static_cast<size_t>(c.regs) + 32, panel = block_bytes * static_cast<size_t>(nb);
      ASSERT_EQ(packed_panel_bytes(c.t, cols), panel);
      std::vector<uint8_t> out(packed_bytes(c.t, rows, cols), 0xab);
      pack_panels(c.t, w.data(), stride, rows, cols, p0, p1, out.data());
      for (size_t i = 0; i < panel; ++i) ASSERT_EQ(out[i], 0xab) << "panel 0 is outside [p0, p1) and was written";
      for (int64_t p = p0; p < p1; ++p)
        for (int64_t b = 0; b < nb; ++b)
          for (int r = 0; r < 16; ++r) {
            const int64_t row = 16 * p + r;
            const uint8_t* src = w.data() + row * stride + b * c.block;
            const uint8_t* dst = out.data() + p * panel + b * block_bytes;
            for (int j = 0; j < c.regs; ++j)
              for (int k = 0; k < 4; ++k)
                ASSERT_EQ(dst[64 * j + 4 * r + k], row < rows ? static_cast<uint8_t>(src[2 + 4 * j + k] ^ c.flip) : 0)
                    << dtype_name(c.t) << " nb " << nb << " panel " << p << " block " << b << " reg " << j << " row " << r;
            for (int k = 0; k < 2; ++k)
              ASSERT_EQ(dst[64 * c.regs + 2 * r + k], row < rows ? src[c.d_at + k] : 0) << "scale of row " << row;
          }
    }
  }
}

class PackedAmxTest : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    if (packed_kernels_amx(GetParam()) == nullptr)
      GTEST_SKIP() << "no AMX-INT8 here (CPU, kernel permission or PAGODA_CPU): the VNNI tile runs instead";
  }
};

TEST_P(PackedAmxTest, TileEqualsTheGemvBitForBitForEveryTokenCount) {
  const DType t = GetParam();
  const PackedKernels* amx = packed_kernels_amx(t);
  const PackedKernels* vnni = packed_kernels_avx512(t);
  ASSERT_NE(vnni, nullptr);
  std::mt19937 rng(14);
  for (int64_t blocks : {1, 6}) {
    for (int64_t rows : {1, 15, 37}) {
      const int64_t n = blocks * dtype_info(t).block_size, max_tokens = 131;
      Matrix m = make_matrix(t, rows, n, rng);
      const size_t xb = row_bytes(vec_dot_type(t), n) + 40;  // rows with a gap between them
      std::vector<uint8_t> x(xb * max_tokens);
      const std::vector<uint8_t> packed_x = activations(t, max_tokens, n, rng);
      for (int64_t tk = 0; tk < max_tokens; ++tk)
        std::memcpy(&x[tk * xb], &packed_x[tk * (xb - 40)], xb - 40);
      std::vector<float> alone(static_cast<size_t>(rows * max_tokens));
      for (int64_t tk = 0; tk < max_tokens; ++tk) vnni->gemv(n, m.packed.data(), rows, &x[tk * xb], &alone[tk * rows]);
      const size_t ys = rows + 3;
      for (int64_t tokens = 1; tokens <= max_tokens; tokens += tokens < 70 ? 1 : 61) {
        std::vector<float> y(ys * static_cast<size_t>(tokens), -7.0f);
        amx->tile(n, m.packed.data(), rows, x.data(), xb, tokens, y.data(), ys);
        for (int64_t tk = 0; tk < tokens; ++tk) {
          for (int64_t r = 0; r < rows; ++r)
            ASSERT_EQ(std::memcmp(&y[tk * ys + r], &alone[tk * rows + r], sizeof(float)), 0)
                << "blocks=" << blocks << " rows=" << rows << " tokens=" << tokens << " token " << tk << " row " << r
                << ": " << y[tk * ys + r] << " vs " << alone[tk * rows + r];
          for (size_t r = rows; r < ys; ++r) ASSERT_EQ(y[tk * ys + r], -7.0f) << "wrote past the rows";
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, PackedAmxTest, ::testing::Values(DType::Q4_K, DType::Q6_K),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

INSTANTIATE_TEST_SUITE_P(Formats, PackedTest, ::testing::Values(DType::Q4_0, DType::Q5_0, DType::Q8_0, DType::Q4_K,
                                                                     DType::Q6_K),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace pagoda

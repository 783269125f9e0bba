#include "kernels/matmul/matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/matmul/dot_kernels.h"
#include "quant/formats.h"

namespace pagoda {
namespace {

// matmul must equal, up to summation order, the scalar vec_dot of the weight row with the
// activation converted to the vec-dot type (threads and SIMD bodies only reorder it), and be
// close to the float product of the dequantized weights.
class MatmulTest : public ::testing::TestWithParam<DType> {};

TEST_P(MatmulTest, MatchesScalarDotAndFloatProduct) {
  const DType t = GetParam();
  const int64_t rows = 37, cols = 512, tokens = 5;
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> wf(rows * cols), x(tokens * cols);
  for (float& v : wf) v = nd(rng);
  for (float& v : x) v = nd(rng);
  const size_t rb = row_bytes(t, cols);
  std::vector<uint8_t> wq(rb * rows);
  for (int64_t r = 0; r < rows; ++r) quantize_row(t, &wf[r * cols], wq.data() + r * rb, cols);
  WeightView w{t, rows, cols, rb, wq.data()};
  std::vector<float> y(tokens * rows);
  ThreadPool pool(2);
  matmul(w, x.data(), tokens, y.data(), pool);

  const DType xt = vec_dot_type(t);
  std::vector<uint8_t> xq(row_bytes(xt, cols));
  std::vector<float> wd(cols), xd(cols);
  for (int64_t tk = 0; tk < tokens; ++tk) {
    quantize_activation_row(xt, &x[tk * cols], xq.data(), cols);
    dequantize_row(xt, xq.data(), xd.data(), cols);
    for (int64_t r = 0; r < rows; ++r) {
      // SIMD bodies sum in another order than the scalar reference: float rounding only.
      const float scalar = vec_dot(t, cols, w.row(r), xq.data());
      EXPECT_NEAR(y[tk * rows + r], scalar, 1e-5 * (std::fabs(scalar) + std::sqrt(static_cast<double>(cols))));
      dequantize_row(t, w.row(r), wd.data(), cols);
      double ref = 0;
      for (int64_t i = 0; i < cols; ++i) ref += static_cast<double>(wd[i]) * xd[i];
      EXPECT_NEAR(y[tk * rows + r], ref, 1e-3 * std::sqrt(static_cast<double>(cols)));
    }
  }
}

// Decode (one token) runs rows several at a time through dot_rows: each output must still
// be exactly this machine's dot of its row, whatever rows a thread's range holds.
TEST_P(MatmulTest, DecodeEqualsDotPerRowBitForBit) {
  const DType t = GetParam();
  const int64_t rows = 53, cols = 512 + 96;  // a grain-splitting row count and a block tail
  const int64_t ncols = dtype_info(t).block_size > 32 ? 768 : cols;
  std::mt19937 rng(9);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> wf(static_cast<size_t>(rows * ncols)), x(static_cast<size_t>(ncols));
  for (float& v : wf) v = nd(rng);
  for (float& v : x) v = nd(rng);
  const size_t rb = row_bytes(t, ncols);
  std::vector<uint8_t> wq(rb * rows);
  for (int64_t r = 0; r < rows; ++r) quantize_row(t, &wf[r * ncols], wq.data() + r * rb, ncols);
  const WeightView w{t, rows, ncols, rb, wq.data()};
  std::vector<float> y(rows);
  ThreadPool pool(2);
  matmul(w, x.data(), 1, y.data(), pool);
  const DotKernels& k = dot_kernels(t);
  std::vector<uint8_t> xq(row_bytes(vec_dot_type(t), ncols));
  k.quantize_x(x.data(), xq.data(), ncols);
  for (int64_t r = 0; r < rows; ++r) EXPECT_EQ(y[r], k.dot(ncols, w.row(r), xq.data())) << "row " << r;
}

// A layer's Q/K/V (or gate/up) through matmul_shared_input must give exactly what each
// matrix gives through matmul: fused for one token, one by one otherwise.
TEST_P(MatmulTest, SharedInputGroupEqualsSeparateCallsBitForBit) {
  const DType t = GetParam();
  const int64_t cols = 512;
  const int64_t rows[] = {40, 17, 17};  // row counts that split across grain boundaries
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const size_t rb = row_bytes(t, cols);
  std::vector<std::vector<uint8_t>> wq(3);
  std::vector<WeightView> w(3);
  for (int i = 0; i < 3; ++i) {
    std::vector<float> wf(static_cast<size_t>(rows[i] * cols));
    for (float& v : wf) v = nd(rng);
    wq[i].resize(rb * static_cast<size_t>(rows[i]));
    for (int64_t r = 0; r < rows[i]; ++r) quantize_row(t, &wf[r * cols], wq[i].data() + r * rb, cols);
    w[i] = WeightView{t, rows[i], cols, rb, wq[i].data()};
  }
  ThreadPool pool(3);
  for (int64_t tokens : {1, 3}) {
    std::vector<float> x(static_cast<size_t>(tokens * cols));
    for (float& v : x) v = nd(rng);
    std::vector<std::vector<float>> sep(3), fused(3);
    for (int i = 0; i < 3; ++i) {
      sep[i].assign(static_cast<size_t>(tokens * rows[i]), 0.0f);
      fused[i].assign(static_cast<size_t>(tokens * rows[i]), -1.0f);
      matmul(w[i], x.data(), tokens, sep[i].data(), pool);
    }
    const WeightView* ws[] = {&w[0], &w[1], &w[2]};
    float* ys[] = {fused[0].data(), fused[1].data(), fused[2].data()};
    matmul_shared_input(ws, x.data(), tokens, ys, pool);
    for (int i = 0; i < 3; ++i) EXPECT_EQ(sep[i], fused[i]) << "matrix " << i << ", " << tokens << " tokens";
  }
}

// The experts of a mixture-of-experts step through matmul_jobs: each job must give exactly
// what matmul gives it alone, with one token (decode), several (a batch's tokens routed to
// one expert, past a token tile), jobs sharing an input and row counts off the grain.
TEST_P(MatmulTest, JobsEqualSeparateCallsBitForBit) {
  const DType t = GetParam();
  const int64_t cols = 512;
  const int64_t rows[] = {40, 17, 33, 64};
  const int64_t tokens[] = {1, 1, 3, 70};
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const size_t rb = row_bytes(t, cols);
  std::vector<std::vector<uint8_t>> wq(4);
  std::vector<WeightView> w(4);
  std::vector<std::vector<float>> x(4), sep(4), grouped(4);
  for (int i = 0; i < 4; ++i) {
    std::vector<float> wf(static_cast<size_t>(rows[i] * cols));
    for (float& v : wf) v = nd(rng);
    wq[i].resize(rb * static_cast<size_t>(rows[i]));
    for (int64_t r = 0; r < rows[i]; ++r) quantize_row(t, &wf[r * cols], wq[i].data() + r * rb, cols);
    w[i] = WeightView{t, rows[i], cols, rb, wq[i].data()};
    x[i].resize(static_cast<size_t>(tokens[i] * cols));
    for (float& v : x[i]) v = nd(rng);
  }
  ThreadPool pool(3);
  std::vector<MatmulJob> jobs;
  for (int i = 0; i < 4; ++i) {
    // Job 1 reads job 0's input, as an expert's up reads its gate's.
    const float* xi = i == 1 ? x[0].data() : x[i].data();
    sep[i].assign(static_cast<size_t>(tokens[i] * rows[i]), 0.0f);
    grouped[i].assign(static_cast<size_t>(tokens[i] * rows[i]), -1.0f);
    matmul(w[i], xi, tokens[i], sep[i].data(), pool);
    jobs.push_back(MatmulJob{&w[i], xi, tokens[i], grouped[i].data()});
  }
  matmul_jobs(jobs, pool);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(sep[i], grouped[i]) << "job " << i << ", " << tokens[i] << " tokens";
}

INSTANTIATE_TEST_SUITE_P(Formats, MatmulTest,
                         ::testing::Values(DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0,
                                           DType::Q5_0, DType::Q4_K, DType::Q6_K),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace pagoda

// The 2:4 sparse formats (quant/sparse24.h): codes name every pair of every group, the
// selection keeps exactly two of four by the stated rule, and the row functions are the
// dense format's over the expanded row, bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "quant/blocks.h"
#include "quant/formats.h"
#include "quant/sparse24.h"

namespace pagoda {
namespace {

std::vector<float> random_row(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = nd(rng);
  return v;
}

TEST(Sparse24, EveryCodeDecodesToTheKeptPositionsItWasEncodedFrom) {
  for (int a = 0; a < 6; ++a)
    for (int b = 0; b < 6; ++b) {
      uint8_t keep[kS24Block] = {};
      // Group g keeps pair a when g is even, b when odd.
      for (int g = 0; g < kS24Block / 4; ++g)
        for (int p : kS24Pairs[g % 2 == 0 ? a : b]) keep[4 * g + p] = 1;
      uint8_t codes[6];
      ASSERT_TRUE(s24_encode(keep, codes));
      uint8_t pos[kS24Kept];
      s24_positions(codes, pos);
      int k = 0;
      for (int i = 0; i < kS24Block; ++i) {
        if (keep[i]) {
          ASSERT_EQ(pos[k++], i) << a << " " << b;
        }
      }
    }
}

TEST(Sparse24, EncodeRefusesAGroupThatDoesNotKeepTwo) {
  uint8_t keep[kS24Block] = {};
  for (int g = 0; g < kS24Block / 4; ++g) keep[4 * g] = keep[4 * g + 1] = 1;
  uint8_t codes[6];
  ASSERT_TRUE(s24_encode(keep, codes));
  keep[5 * 4 + 2] = 1;  // three in group 5
  EXPECT_FALSE(s24_encode(keep, codes));
  keep[5 * 4 + 2] = keep[5 * 4 + 1] = keep[5 * 4] = 0;  // none
  EXPECT_FALSE(s24_encode(keep, codes));
}

TEST(Sparse24, SelectKeepsTheTwoLargestOfEveryGroupTiesToTheLowerPosition) {
  const float score[] = {1, 4, 3, 2,  5, 5, 5, 5,  NAN, 0, 0, -1,  2, 9, 9, 1};
  uint8_t keep[16];
  s24_select(score, 16, keep);
  const uint8_t want[] = {0, 1, 1, 0,  1, 1, 0, 0,  0, 1, 1, 0,  0, 1, 1, 0};
  for (int i = 0; i < 16; ++i) EXPECT_EQ(keep[i], want[i]) << i;
  // On random scores every group keeps exactly two.
  const auto r = random_row(4096, 3);
  std::vector<uint8_t> k(r.size());
  s24_select(r.data(), static_cast<int64_t>(r.size()), k.data());
  for (size_t g = 0; g < r.size(); g += 4) ASSERT_EQ(k[g] + k[g + 1] + k[g + 2] + k[g + 3], 2) << g;
}

struct Dense {
  DType sparse, dense;
  void (*expand)(const void*, void*, int64_t);
};

class Sparse24Format : public ::testing::TestWithParam<Dense> {};

TEST_P(Sparse24Format, QuantizedRowKeepsTwoLargestOfEveryGroupAsTheDenseFormatWouldEncodeThem) {
  const Dense f = GetParam();
  const int64_t n = 1024;
  const auto x = random_row(n, 7);
  std::vector<uint8_t> q(row_bytes(f.sparse, n));
  quantize_row(f.sparse, x.data(), q.data(), n);
  std::vector<float> y(n);
  dequantize_row(f.sparse, q.data(), y.data(), n);
  // Kept: the positions the codes name; they are the two largest |x| of each group.
  std::vector<float> mag(n);
  for (int64_t i = 0; i < n; ++i) mag[i] = std::fabs(x[i]);
  std::vector<uint8_t> keep(n);
  s24_select(mag.data(), n, keep.data());
  const size_t bb = dtype_info(f.sparse).type_size;
  for (int64_t b = 0; b < n / kS24Block; ++b) {
    uint8_t pos[kS24Kept];
    s24_positions(q.data() + b * bb + 2, pos);
    std::vector<float> kept;
    for (int k = 0; k < kS24Kept; ++k) {
      ASSERT_TRUE(keep[b * kS24Block + pos[k]]) << b << " " << k;
      kept.push_back(x[b * kS24Block + pos[k]]);
    }
    for (int64_t i = 0; i < kS24Block; ++i) {
      if (!keep[b * kS24Block + i]) {
        ASSERT_EQ(y[b * kS24Block + i], 0.0f);
      }
    }
    // The kept values are the dense format's block over them.
    std::vector<uint8_t> dq(row_bytes(f.dense, kS24Kept));
    quantize_row(f.dense, kept.data(), dq.data(), kS24Kept);
    std::vector<float> dk(kS24Kept);
    dequantize_row(f.dense, dq.data(), dk.data(), kS24Kept);
    for (int k = 0; k < kS24Kept; ++k) ASSERT_EQ(y[b * kS24Block + pos[k]], dk[k]) << b << " " << k;
  }
}

TEST_P(Sparse24Format, DotAndDequantizeEqualTheDenseFormatOnTheExpandedRow) {
  const Dense f = GetParam();
  for (int64_t n : {64, 128, 2048}) {
    const auto w = random_row(n, 11);
    const auto xf = random_row(n, 12);
    std::vector<uint8_t> q(row_bytes(f.sparse, n)), e(row_bytes(f.dense, n)), x(row_bytes(DType::Q8_0, n));
    quantize_row(f.sparse, w.data(), q.data(), n);
    f.expand(q.data(), e.data(), n);
    quantize_activation_row(DType::Q8_0, xf.data(), x.data(), n);
    std::vector<float> a(n), b(n);
    dequantize_row(f.sparse, q.data(), a.data(), n);
    dequantize_row(f.dense, e.data(), b.data(), n);
    // Equal as values: the dense Q4_0 gives a dropped position (8 - 8) * d, -0 when d < 0.
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(a[i], b[i]) << n << " " << i;
    const float ds = vec_dot(f.sparse, n, q.data(), x.data());
    const float dd = vec_dot(f.dense, n, e.data(), x.data());
    ASSERT_EQ(std::memcmp(&ds, &dd, sizeof ds), 0) << n << ": " << ds << " vs " << dd;
    ASSERT_NE(ds, 0.0f);
  }
}

TEST_P(Sparse24Format, IsSmallerThanItsDenseFormatByTheStatedRatio) {
  const Dense f = GetParam();
  const double sparse_bits = 8.0 * row_bytes(f.sparse, 4096) / 4096;
  const double dense_bits = 8.0 * row_bytes(f.dense, 4096) / 4096;
  EXPECT_EQ(sparse_bits, f.dense == DType::Q8_0 ? 5.0 : 3.0);
  EXPECT_GE(dense_bits / sparse_bits, 1.5);
}

INSTANTIATE_TEST_SUITE_P(Formats, Sparse24Format,
                         ::testing::Values(Dense{DType::Q8_0_S24, DType::Q8_0, expand_row_q8_0_s24},
                                           Dense{DType::Q4_0_S24, DType::Q4_0, expand_row_q4_0_s24}),
                         [](const auto& info) { return std::string(dtype_name(info.param.sparse)); });

}  // namespace
}  // namespace pagoda

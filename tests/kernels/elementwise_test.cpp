#include "kernels/elementwise/elementwise.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace pagoda {
namespace {

TEST(RmsNorm, NormalizesToUnitRootMeanSquareThenScales) {
  std::vector<float> x = {3, -4, 0, 0}, w = {1, 2, 1, 1}, out(4);
  rms_norm(x.data(), w.data(), 4, 0.0f, out.data());
  const float rms = std::sqrt((9 + 16) / 4.0f);
  EXPECT_FLOAT_EQ(out[0], 3 / rms);
  EXPECT_FLOAT_EQ(out[1], -4 / rms * 2);
}

// LayerNorm: zero mean and unit variance (population, over n), then the weight and the
// bias; the double formula to float accuracy, eps inside the square root, in place too.
TEST(LayerNorm, CentresScalesThenAppliesWeightAndBias) {
  std::vector<float> x = {1, 2, 3, 6}, w = {1, 2, 0.5f, -1}, b = {0, 1, -1, 0.25f}, out(4);
  layer_norm(x.data(), w.data(), b.data(), 4, 0.0f, out.data());
  const double mean = 3.0, sd = std::sqrt((4 + 1 + 0 + 9) / 4.0);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(out[i], (x[i] - mean) / sd * w[i] + b[i], 1e-6) << i;
  layer_norm(x.data(), nullptr, nullptr, 4, 1.0f, out.data());
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(out[i], (x[i] - mean) / std::sqrt(3.5 + 1.0), 1e-6) << i;
  std::vector<float> c = {5, 5, 5};  // constant row: (x - mean) is 0, eps keeps it finite
  layer_norm(c.data(), nullptr, b.data(), 3, 1e-5f, c.data());
  for (int i = 0; i < 3; ++i) EXPECT_EQ(c[i], b[i]);
}

TEST(Softmax, SumsToOneAndIsShiftInvariant) {
  std::vector<float> a = {1, 2, 3, 1000}, b = {-999, -998, -997, 0};
  softmax(a.data(), 4);
  softmax(b.data(), 4);
  float s = 0;
  for (int i = 0; i < 4; ++i) {
    s += a[i];
    EXPECT_NEAR(a[i], b[i], 1e-6);
  }
  EXPECT_NEAR(s, 1.0f, 1e-6);
}

TEST(Activations, SwigluAndGegluMatchDefinitions) {
  std::vector<float> g = {-2, 0.5f, 3}, u = {1, 2, -1};
  auto g2 = g;
  swiglu(g.data(), u.data(), 3);
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(g[i], g2[i] / (1 + std::exp(-g2[i])) * u[i], 1e-6);
  auto g3 = g2, g4 = g2;
  geglu(g3.data(), u.data(), 3);
  gelu_inplace(g4.data(), 3);
  // tanh-approximate GELU is within 1e-3 of the exact erf form; the ungated one is the
  // gated one's GELU.
  for (int i = 0; i < 3; ++i) {
    EXPECT_NEAR(g3[i], 0.5 * g2[i] * (1 + std::erf(g2[i] / std::sqrt(2.0))) * u[i], 2e-3);
    EXPECT_EQ(g4[i], gelu_fp16_table(g2[i]));
    EXPECT_EQ(g3[i], g4[i] * u[i]);
  }
}

// cap * tanh(x / cap) in llama.cpp's order: within an ulp or two of the double formula
// (the float 1 / cap and the products round), odd, bounded by cap, and the identity's
// slope at 0.
TEST(Softcap, IsCapTimesTanhOfTheScaledValue) {
  for (float cap : {4.0f, 30.0f, 50.0f})
    for (float x : {0.0f, 0.01f, 1.0f, 3.5f, 20.0f, 49.0f, 200.0f, 1e6f}) {
      const double want = cap * std::tanh(static_cast<double>(x) / cap);
      EXPECT_NEAR(softcap(x, cap), want, 3e-7 * std::max(1.0, std::fabs(want))) << x << " cap " << cap;
      EXPECT_EQ(softcap(-x, cap), -softcap(x, cap));
      EXPECT_LE(std::fabs(softcap(x, cap)), cap);
    }
  EXPECT_TRUE(std::signbit(softcap(-0.0f, 30.0f)));
  EXPECT_EQ(softcap(INFINITY, 30.0f), 30.0f);
  std::vector<float> row = {-100.0f, -1.0f, 0.0f, 2.0f, 1000.0f};
  const std::vector<float> in = row;
  softcap_inplace(row.data(), 30.0f, static_cast<int64_t>(row.size()));
  for (size_t i = 0; i < row.size(); ++i) EXPECT_EQ(row[i], softcap(in[i], 30.0f));
}

}  // namespace
}  // namespace pagoda

namespace pagoda {
namespace {

// Every SIMD body against the scalar body (elementwise.h says what may differ).
class ElementwiseSimdTest : public ::testing::TestWithParam<SimdTarget> {};

std::vector<int64_t> sizes() { return {1, 5, 7, 8, 9, 15, 16, 17, 31, 33, 64, 100, 640, 2048, 5632 + 3}; }

// Gaussian values with a sprinkling of extremes: zeros of both signs, tiny and huge
// magnitudes (exp overflow and underflow in SwiGLU), and GeGLU's +-10 cut-offs.
std::vector<float> values(int64_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = nd(rng);
  const float special[] = {0.0f, -0.0f, 1e-30f, -1e-30f, 10.0f, -10.0f, 9.999f, -9.999f, 88.0f, -88.0f, 95.0f, -95.0f, 120.0f, -120.0f, 1e4f, -1e4f};
  for (int64_t i = 3; i < n; i += 11) v[i] = special[(i / 11) % 16];
  return v;
}

// Distance in units in the last place between two finite floats of the same sign (or zero).
int64_t ulps(float a, float b) {
  if (a == b) return 0;
  int32_t ia, ib;
  std::memcpy(&ia, &a, 4);
  std::memcpy(&ib, &b, 4);
  if ((ia < 0) != (ib < 0)) return INT64_MAX;
  return std::llabs(static_cast<int64_t>(ia) - ib);
}

TEST_P(ElementwiseSimdTest, RmsNormMatchesScalar) {
  const ElementwiseKernels simd = elementwise_kernels(GetParam()), ref = elementwise_kernels(SimdTarget::kScalar);
  for (int64_t n : sizes()) {
    const std::vector<float> x = values(n, 1, 3.0f), w = values(n, 2, 1.0f);
    for (const float* wp : {w.data(), static_cast<const float*>(nullptr)}) {
      std::vector<float> a(n), b(n), inplace = x;
      simd.rms_norm(x.data(), wp, n, 1e-6f, a.data());
      ref.rms_norm(x.data(), wp, n, 1e-6f, b.data());
      simd.rms_norm(inplace.data(), wp, n, 1e-6f, inplace.data());
      // Only the order of the double sum differs: the float mean (and so every output)
      // is the same unless the sum sits on a float rounding boundary, then 1 ulp off.
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_LE(ulps(a[i], b[i]), 2) << "n=" << n << " i=" << i;
        ASSERT_EQ(a[i], inplace[i]) << "in place, n=" << n << " i=" << i;
      }
    }
  }
}

TEST_P(ElementwiseSimdTest, LayerNormMatchesScalar) {
  const ElementwiseKernels simd = elementwise_kernels(GetParam()), ref = elementwise_kernels(SimdTarget::kScalar);
  for (int64_t n : sizes()) {
    // An offset mean, so the centring matters (and a tail lane counted wrongly shows).
    std::vector<float> x = values(n, 11, 3.0f);
    for (float& v : x) v += 2.5f;
    const std::vector<float> w = values(n, 12, 1.0f), b = values(n, 13, 0.5f);
    for (int variant = 0; variant < 3; ++variant) {
      const float* wp = variant == 2 ? nullptr : w.data();
      const float* bp = variant == 0 ? b.data() : nullptr;
      std::vector<float> a(n), r(n), inplace = x;
      simd.layer_norm(x.data(), wp, bp, n, 1e-5f, a.data());
      ref.layer_norm(x.data(), wp, bp, n, 1e-5f, r.data());
      simd.layer_norm(inplace.data(), wp, bp, n, 1e-5f, inplace.data());
      // Only the order of the two double sums differs: the float mean and variance are
      // the same unless a sum sits on a float rounding boundary, which moves the outputs
      // by an ulp or two (or, for an output near zero, by as little absolutely).
      for (int64_t i = 0; i < n; ++i) {
        const float tol = 4e-7f * (std::fabs(r[i]) + 1.0f);
        ASSERT_NEAR(a[i], r[i], tol) << "n=" << n << " i=" << i << " variant " << variant;
        ASSERT_EQ(a[i], inplace[i]) << "in place, n=" << n << " i=" << i;
      }
    }
  }
}

TEST_P(ElementwiseSimdTest, SwigluWithinAFewUlpOfScalar) {
  const ElementwiseKernels simd = elementwise_kernels(GetParam()), ref = elementwise_kernels(SimdTarget::kScalar);
  for (int64_t n : sizes()) {
    const std::vector<float> g = values(n, 3, 4.0f), u = values(n, 4, 1.0f);
    std::vector<float> a = g, b = g;
    simd.swiglu(a.data(), u.data(), n);
    ref.swiglu(b.data(), u.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      // exp within 2 ulp of libm's moves silu(g) = g / (1 + e^-g) by at most ~3 ulp
      // (less where 1 + e^-g absorbs it); the product with b adds no error of its own.
      // Outputs below 1e-30 are where exp underflows: compare absolutely.
      if (std::fabs(b[i]) < 1e-30f) ASSERT_NEAR(a[i], b[i], 1e-30f) << "g=" << g[i];
      else ASSERT_LE(ulps(a[i], b[i]), 4) << "n=" << n << " g=" << g[i] << " " << a[i] << " vs " << b[i];
    }
  }
}

// A dense sweep of the gate over [-100, 100): for g << 0, silu(g) ~ g e^g, so this
// measures the vector exp itself against libm's across its whole finite range.
TEST_P(ElementwiseSimdTest, SwigluSweepOfTheExpRange) {
  const ElementwiseKernels simd = elementwise_kernels(GetParam()), ref = elementwise_kernels(SimdTarget::kScalar);
  const int64_t n = 1 << 20;
  std::vector<float> g(n), one(n, 1.0f);
  for (int64_t i = 0; i < n; ++i) g[i] = -100.0f + 200.0f * static_cast<float>(i) / static_cast<float>(n);
  std::vector<float> a = g, b = g;
  simd.swiglu(a.data(), one.data(), n);
  ref.swiglu(b.data(), one.data(), n);
  int64_t worst = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (std::fabs(b[i]) < 1e-37f) {  // e^g subnormal or zero: compare absolutely
      ASSERT_NEAR(a[i], b[i], 1e-44f) << "g=" << g[i];
      continue;
    }
    worst = std::max(worst, ulps(a[i], b[i]));
  }
  RecordProperty("max_ulps", std::to_string(worst));
  EXPECT_LE(worst, 4);
}

// exp_inplace (and the exp inside softmax and attention) must be libm's expf bit for bit.
// Every float input was checked once (2^32 values, both targets, no difference); this
// samples 2^22 bit patterns spread over every exponent, plus the edges of the range.
TEST_P(ElementwiseSimdTest, ExpIsLibmBitForBit) {
  const ElementwiseKernels simd = elementwise_kernels(GetParam());
  std::vector<float> x;
  std::mt19937 rng(9);
  for (int i = 0; i < (1 << 22); ++i) {
    const uint32_t u = static_cast<uint32_t>(rng());
    float f;
    std::memcpy(&f, &u, 4);
    x.push_back(f);
  }
  for (float f : {0.0f, -0.0f, 88.72283f, 88.72284f, -87.33654f, -103.97207f, -103.97208f, -104.0f, 89.0f,
                  INFINITY, -INFINITY, NAN, 1e-45f, -1e-45f})
    x.push_back(f);
  std::vector<float> y = x;
  simd.exp(y.data(), static_cast<int64_t>(y.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    const float want = std::exp(x[i]);
    if (std::isnan(want)) ASSERT_TRUE(std::isnan(y[i])) << x[i];
    else ASSERT_EQ(std::memcmp(&want, &y[i], 4), 0) << "x=" << x[i] << " got " << y[i] << " want " << want;
  }
}

TEST_P(ElementwiseSimdTest, GegluGeluAddScaleAreBitExact) {
  const ElementwiseKernels simd = elementwise_kernels(GetParam()), ref = elementwise_kernels(SimdTarget::kScalar);
  for (int64_t n : sizes()) {
    const std::vector<float> g = values(n, 5, 4.0f), u = values(n, 6, 1.0f);
    std::vector<float> a = g, b = g;
    simd.geglu(a.data(), u.data(), n);
    ref.geglu(b.data(), u.data(), n);
    ASSERT_EQ(std::memcmp(a.data(), b.data(), n * sizeof(float)), 0) << "geglu n=" << n;
    a = g;
    b = g;
    simd.gelu(a.data(), n);
    ref.gelu(b.data(), n);
    ASSERT_EQ(std::memcmp(a.data(), b.data(), n * sizeof(float)), 0) << "gelu n=" << n;
    a = g;
    b = g;
    simd.add(a.data(), u.data(), n);
    ref.add(b.data(), u.data(), n);
    ASSERT_EQ(std::memcmp(a.data(), b.data(), n * sizeof(float)), 0) << "add n=" << n;
    simd.scale(a.data(), 0.37f, n);
    ref.scale(b.data(), 0.37f, n);
    ASSERT_EQ(std::memcmp(a.data(), b.data(), n * sizeof(float)), 0) << "scale n=" << n;
  }
}

TEST_P(ElementwiseSimdTest, SoftmaxMatchesScalar) {
  const ElementwiseKernels simd = elementwise_kernels(GetParam()), ref = elementwise_kernels(SimdTarget::kScalar);
  for (int64_t n : sizes()) {
    std::vector<float> a = values(n, 7, 5.0f), b = a;
    simd.softmax(a.data(), n);
    ref.softmax(b.data(), n);
    // Same exp (bit for bit), same max; the double sum's order may move 1 / sum by an ulp.
    for (int64_t i = 0; i < n; ++i) ASSERT_LE(ulps(a[i], b[i]), 1) << "n=" << n << " i=" << i;
  }
}

// The row normalizer of perplexity and compression: the SIMD bodies' vector exp (1 ulp)
// and float lanes may move the log by about 1e-6; the argmax is the first maximum, and
// the special rows (all -inf, a NaN, a tie split across vectors, one +inf) come out as the
// scalar body's.
TEST_P(ElementwiseSimdTest, LogSumExpRowMatchesScalar) {
  const ElementwiseKernels simd = elementwise_kernels(GetParam()), ref = elementwise_kernels(SimdTarget::kScalar);
  std::vector<int64_t> ns = sizes();
  ns.push_back(262144 + 5);
  for (int64_t n : ns) {
    std::vector<float> x = values(n, 9, 12.0f);
    for (int64_t i = 3; i < n; i += 7) x[static_cast<size_t>(i)] = -INFINITY;  // banned tokens
    int32_t a = -1, b = -1;
    const double ls = simd.log_sum_exp(x.data(), n, &a), lr = ref.log_sum_exp(x.data(), n, &b);
    ASSERT_NEAR(ls, lr, 2e-6 * std::max(1.0, std::abs(lr))) << "n=" << n;
    ASSERT_EQ(a, b) << "n=" << n;
    // The same maximum twice, the second in a later vector: the first wins.
    if (n > 40) {
      x[5] = 2e4f;
      x[static_cast<size_t>(n - 2)] = 2e4f;
      ASSERT_NEAR(simd.log_sum_exp(x.data(), n, &a), ref.log_sum_exp(x.data(), n, &b), 2e-5) << "n=" << n;
      ASSERT_EQ(a, 5);
      ASSERT_EQ(b, 5);
    }
    std::vector<float> none(static_cast<size_t>(n), -INFINITY);
    ASSERT_EQ(simd.log_sum_exp(none.data(), n, &a), -INFINITY);
    ASSERT_EQ(a, 0);
    std::vector<float> bad = values(n, 10, 3.0f);
    bad[static_cast<size_t>(n / 2)] = NAN;
    ASSERT_TRUE(std::isnan(simd.log_sum_exp(bad.data(), n, nullptr))) << "n=" << n;
    ASSERT_TRUE(std::isnan(ref.log_sum_exp(bad.data(), n, nullptr)));
  }
  // Against the definition in long double on a small row.
  const std::vector<float> small = {1.0f, 2.0f, 3.0f, -1.0f, 0.5f};
  long double sum = 0;
  for (float v : small) sum += std::exp(static_cast<long double>(v));
  int32_t at = -1;
  EXPECT_NEAR(simd.log_sum_exp(small.data(), 5, &at), static_cast<double>(std::log(sum)), 1e-6);
  EXPECT_EQ(at, 2);
}

// Soft-capping: every body gives the scalar softcap's bits (vtanh.h's vector tanh is the
// correctly rounded one, as the scalar body's is), over sampled bit patterns of every
// exponent, values near the tanh series / ratio switch (1/16 after the division) and its
// saturation (10), and the special values. Checked once for every float input with caps
// 1 (the tanh of every float) and 50, on both targets: no difference.
TEST_P(ElementwiseSimdTest, SoftcapIsTheScalarBitForBit) {
  const ElementwiseKernels simd = elementwise_kernels(GetParam()), ref = elementwise_kernels(SimdTarget::kScalar);
  std::vector<float> x;
  std::mt19937 rng(11);
  for (int i = 0; i < (1 << 20); ++i) {
    const uint32_t u = static_cast<uint32_t>(rng());
    float f;
    std::memcpy(&f, &u, 4);
    x.push_back(f);
  }
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (int i = 0; i < (1 << 16); ++i) x.push_back(nd(rng) * 0.0625f);
  for (int i = 0; i < (1 << 16); ++i) x.push_back(nd(rng) * 40.0f);
  for (float f : {0.0f, -0.0f, 0.0625f, -0.0625f, 10.0f, -10.0f, 9.0f, 9.1f, 1e-45f, -1e-45f, 1e-30f, 3e38f, -3e38f,
                  INFINITY, -INFINITY, NAN})
    x.push_back(f);
  for (float cap : {1.0f, 4.0f, 30.0f, 50.0f}) {
    std::vector<float> a = x, b = x;
    for (int64_t n : sizes()) {  // tails of every length
      std::vector<float> c(x.begin(), x.begin() + n), d = c;
      simd.softcap(c.data(), cap, n);
      ref.softcap(d.data(), cap, n);
      ASSERT_EQ(std::memcmp(c.data(), d.data(), n * sizeof(float)), 0) << "cap " << cap << " n=" << n;
    }
    simd.softcap(a.data(), cap, static_cast<int64_t>(a.size()));
    ref.softcap(b.data(), cap, static_cast<int64_t>(b.size()));
    for (size_t i = 0; i < x.size(); ++i) {
      if (std::isnan(b[i])) {
        ASSERT_TRUE(std::isnan(a[i])) << "x=" << x[i];
        continue;
      }
      ASSERT_EQ(std::memcmp(&a[i], &b[i], 4), 0)
          << "cap " << cap << " x=" << x[i] << " got " << a[i] << " want " << b[i];
    }
  }
}

// No SIMD target on this CPU (or PAGODA_CPU=scalar): nothing to compare.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(ElementwiseSimdTest);
INSTANTIATE_TEST_SUITE_P(Targets, ElementwiseSimdTest, ::testing::ValuesIn([] {
                           std::vector<SimdTarget> t = runnable_simd_targets();
                           t.erase(t.begin());  // scalar is the reference
                           return t;
                         }()),
                         [](const auto& info) { return std::string(simd_target_name(info.param)); });

}  // namespace
}  // namespace pagoda

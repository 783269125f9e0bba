#include "kernels/elementwise.h"

#include <gtest/gtest.h>

#include <cmath>
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
  auto g3 = g2;
  geglu(g3.data(), u.data(), 3);
  // tanh-approximate GELU is within 1e-3 of the exact erf form.
  for (int i = 0; i < 3; ++i)
    EXPECT_NEAR(g3[i], 0.5 * g2[i] * (1 + std::erf(g2[i] / std::sqrt(2.0))) * u[i], 2e-3);
}

}  // namespace
}  // namespace pagoda

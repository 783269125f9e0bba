#include "base/fp16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace pagoda {
namespace {

TEST(Fp16, RoundTripsEveryHalfValue) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = fp16_to_fp32(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(fp32_to_fp16(f), h) << h;
  }
}

TEST(Fp16, RoundsToNearestEven) {
  // 1 + 2^-11 lies halfway between 1 and the next half (1 + 2^-10): ties go to even (1).
  EXPECT_EQ(fp32_to_fp16(1.0f + std::ldexp(1.0f, -11)), 0x3C00);
  EXPECT_EQ(fp32_to_fp16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);
  EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7C00);  // overflows to infinity
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
}

TEST(Bf16, RoundsToNearestEvenAndKeepsNan) {
  EXPECT_EQ(fp32_to_bf16(1.0f), 0x3F80);
  EXPECT_EQ(bf16_to_fp32(0x3F80), 1.0f);
  EXPECT_EQ(fp32_to_bf16(fp32_from_bits(0x3F808000u)), 0x3F80);  // tie -> even
  EXPECT_EQ(fp32_to_bf16(fp32_from_bits(0x3F818000u)), 0x3F82);  // tie -> even (up)
  EXPECT_TRUE(std::isnan(bf16_to_fp32(fp32_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
}

}  // namespace
}  // namespace pagoda

#include "constrain/utf8_guard.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace pagoda {
namespace {

TEST(Utf8Guard, WellFormedTextEndsAtABoundary) {
  EXPECT_EQ(Utf8Guard::run(Utf8Guard::kBoundary, "a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80"), Utf8Guard::kBoundary);
  EXPECT_NE(Utf8Guard::run(Utf8Guard::kBoundary, "\xE2\x82"), Utf8Guard::kBoundary);
  EXPECT_NE(Utf8Guard::run(Utf8Guard::kBoundary, "\xE2\x82"), Utf8Guard::kInvalid);
}

TEST(Utf8Guard, SurrogatesOverlongsAndStrayBytesAreIllFormed) {
  for (const char* bad : {"\xED\xA0\x80", "\xC0\xAF", "\xE0\x80\xAF", "\xF4\x90\x80\x80", "\x80", "\xFF", "\xC3\x41"})
    EXPECT_EQ(Utf8Guard::run(Utf8Guard::kBoundary, bad), Utf8Guard::kInvalid) << bad;
}

TEST(Utf8Guard, InsideACharacterOnlyItsContinuationIsAllowed) {
  // 0 "a", 1 "\xA9", 2 "" (a stop token), 3 "\xED", 4 "\xA0", 5 "\x9F", 6 "\xC3"
  Utf8Guard g({"a", "\xA9", "", "\xED", "\xA0", "\x9F", "\xC3"});
  std::vector<float> l(7, 0.0f);
  g.mask(Utf8Guard::kBoundary, l);
  EXPECT_TRUE(std::isfinite(l[0]) && std::isfinite(l[2]) && std::isfinite(l[3]) && std::isfinite(l[6]));
  EXPECT_TRUE(std::isinf(l[1]) && std::isinf(l[4]) && std::isinf(l[5]));  // stray continuations

  const uint8_t after_c3 = g.after(Utf8Guard::kBoundary, 6);
  l.assign(7, 0.0f);
  g.mask(after_c3, l);
  EXPECT_TRUE(std::isfinite(l[1]) && std::isfinite(l[4]) && std::isfinite(l[5]));
  EXPECT_TRUE(std::isinf(l[0]) && std::isinf(l[2]) && std::isinf(l[3]) && std::isinf(l[6]));  // no end mid-character

  const uint8_t after_ed = g.after(Utf8Guard::kBoundary, 3);
  l.assign(7, 0.0f);
  g.mask(after_ed, l);
  EXPECT_TRUE(std::isinf(l[4])) << "ED A0 starts a surrogate";
  EXPECT_TRUE(std::isfinite(l[5]));
}

}  // namespace
}  // namespace pagoda

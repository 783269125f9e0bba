#include "base/printable.h"

#include <gtest/gtest.h>

#include <string>

namespace pagoda {
namespace {

TEST(Printable, KeepsReadableUtf8AndEscapesControls) {
  EXPECT_EQ(printable("héllo 世界 🙂"), "héllo 世界 🙂");
  EXPECT_EQ(printable("a\nb\tc\\d"), "a\\nb\\tc\\\\d");
  EXPECT_EQ(printable("\x1b]0;title\x07"), "\\x1b]0;title\\x07");
  EXPECT_EQ(printable("\x7f"), "\\x7f");
  EXPECT_EQ(printable("\xc2\x9b"), "\\u{009b}");          // C1 CSI
  EXPECT_EQ(printable("a\xe2\x80\xae" "b"), "a\\u{202e}b");  // right-to-left override
}

TEST(Printable, EscapesInvalidUtf8ByteByByte) {
  EXPECT_EQ(printable("\xff\xfe"), "\\xff\\xfe");
  EXPECT_EQ(printable("\xc0\xaf"), "\\xc0\\xaf");          // overlong '/'
  EXPECT_EQ(printable("\xed\xa0\x80"), "\\xed\\xa0\\x80");  // a surrogate
  EXPECT_EQ(printable("\xe4\xb8"), "\\xe4\\xb8");          // truncated sequence
}

TEST(Printable, CutsLongTextAndSaysHowLong) {
  const std::string s(1000, 'a');
  EXPECT_EQ(printable(s, 4), "aaaa... (1000 bytes)");
  EXPECT_EQ(in_quotes(s, 4), "'aaaa...' (1000 bytes)");
  EXPECT_EQ(in_quotes("ab"), "'ab'");
  // A sequence cut by the limit is shown as bytes, never as half a character.
  EXPECT_EQ(printable("ab世", 3), "ab\\xe4... (5 bytes)");
}

}  // namespace
}  // namespace pagoda

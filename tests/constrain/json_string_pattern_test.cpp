// A schema pattern rewritten over the JSON text of the string: the characters a JSON
// string cannot hold raw are matched by their escapes; everything else is left as written.
#include "constrain/json_string_pattern.h"

#include <gtest/gtest.h>

namespace pagoda {
namespace {

std::string over(std::string_view p) {
  auto r = pattern_over_json_text(p);
  EXPECT_TRUE(r) << p << ": " << r.status().message();
  return r ? *r : std::string();
}

TEST(JsonStringPattern, PatternsWithoutSpecialCharactersAreKept) {
  for (std::string_view p : {"^[a-z]{3}$", R"(^\d+(\.\d+)?$)", "^(foo|bar)*$", R"(^\w+@\w+\.com$)", "^[é-ü]$"})
    EXPECT_EQ(over(p), p);
}

TEST(JsonStringPattern, QuotesBackslashesAndControlsBecomeTheirEscapes) {
  EXPECT_EQ(over(R"(^a\\b$)"), R"(^a(?:\\\\)b$)");
  EXPECT_EQ(over(R"(^"x"$)"), R"(^\\"x\\"$)");
  EXPECT_EQ(over(R"(^\t\n$)"), R"(^(?:\\t)(?:\\n)$)");
  EXPECT_EQ(over(R"(^\x1b$)"), R"(^(?:\\u001[bB])$)");
  EXPECT_EQ(over(R"(^\u0000$)"), R"(^(?:\\u0000)$)");
  EXPECT_EQ(over(R"(^\.$)"), R"(^\.$)");  // an escaped ordinary character stays
}

TEST(JsonStringPattern, ClassesListTheEscapesOfTheSpecialsTheyHold) {
  EXPECT_EQ(over(R"(^["a]$)"), R"(^(?:[a]|\\")$)");
  EXPECT_EQ(over(R"(^[\\]$)"), R"(^(?:\\\\)$)");
  // A range over a special is cut around it.
  EXPECT_EQ(over(R"(^[ -$]$)"), R"(^(?:[\ -\!\#-\$]|\\")$)");
  // A negated class: the specials it does not list are admitted as escapes only.
  const std::string neg = over("^[^a]$");
  EXPECT_EQ(neg.rfind(R"(^(?:[^a"\\\x00-\x1f]|)", 0), 0u) << neg;
  EXPECT_NE(neg.find(R"(|\\")"), std::string::npos);
  EXPECT_NE(neg.find(R"(|\\\\)"), std::string::npos);
  EXPECT_NE(neg.find(R"(|\\n)"), std::string::npos);
}

TEST(JsonStringPattern, DotAndNegatedClassEscapesAdmitEscapesNotRawSpecials) {
  const std::string dot = over("^.$");
  EXPECT_NE(dot.find(R"([^"\\\x00-\x1f])"), std::string::npos) << dot;
  EXPECT_EQ(dot.find(R"(\\n)"), std::string::npos) << "a dot does not match a newline";
  EXPECT_NE(over(R"(^\S$)").find(R"([^ "\\\x00-\x1f])"), std::string::npos);
  EXPECT_NE(over(R"(^\D$)").find(R"([^0-9"\\\x00-\x1f])"), std::string::npos);
}

TEST(JsonStringPattern, WhatCannotBeRewrittenIsAClearError) {
  for (std::string_view p : {R"(^[\D]$)", R"(^[\S]$)", "^[abc$", "^[z-a]$"}) {
    auto r = pattern_over_json_text(p);
    ASSERT_FALSE(r) << p;
    EXPECT_NE(r.status().message().find("'pattern'"), std::string::npos) << r.status().message();
  }
}

}  // namespace
}  // namespace pagoda

#include "compress/budget.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace pagoda {
namespace {

// Units of one token each (pieces all start with a space), scores as given.
std::vector<Unit> flat_units(const std::vector<float>& scores) {
  std::vector<Unit> u;
  for (size_t i = 0; i < scores.size(); ++i)
    u.push_back(Unit{static_cast<int32_t>(i), static_cast<int32_t>(i) + 1, scores[i]});
  return u;
}

TEST(Budget, DropsLowestSelfInformationFirst) {
  const std::vector<float> scores = {5, 1, 9, 0.5f, 3, 2, 8, 0.1f};
  const auto units = flat_units(scores);
  const auto keep = select_units(units, BudgetOptions{4, 0.0});
  // The four lowest (0.1, 0.5, 1, 2) go.
  const std::vector<bool> want = {true, false, true, false, true, false, true, false};
  EXPECT_EQ(keep, want);
}

TEST(Budget, ReachesTheTargetWithinATokenSkippingUnitsTooLong) {
  // Multi-token units: a three-token unit with the lowest score must not overshoot.
  std::vector<Unit> u = {{0, 3, 0.1f}, {3, 4, 1}, {4, 5, 2}, {5, 7, 3}, {7, 8, 4}, {8, 9, 5}, {9, 10, 6}};
  for (int32_t target = 1; target <= 10; ++target) {
    const auto keep = select_units(u, BudgetOptions{target, 0.0});
    const int32_t kept = kept_tokens(u, keep);
    EXPECT_GE(kept, target);
    EXPECT_LE(kept, target + 1) << "target " << target;
  }
  // Target 8: dropping the 3-token unit would leave 7, so the 1- and 2-token units are
  // taken instead, lowest first.
  const auto keep = select_units(u, BudgetOptions{8, 0.0});
  EXPECT_EQ(kept_tokens(u, keep), 8);
  EXPECT_TRUE(keep[0]);
  EXPECT_FALSE(keep[1]);
  EXPECT_FALSE(keep[2]);
}

TEST(Budget, KeepsStructureAlwaysAndNamesWithinTheirShare) {
  std::vector<Unit> u = flat_units({0.1f, 0.2f, 0.3f, 0.4f, 5, 6, 7, 8, 9, 10});
  u[0].structural = true;  // a period: lowest score, kept anyway
  u[1].name = true;        // names, protected while they fit 0.3 x 4 = 1 token
  u[2].name = true;
  const auto keep = select_units(u, BudgetOptions{4, 0.3});
  EXPECT_TRUE(keep[0]);
  // The better-scored name is protected; the other competes and, scoring low, goes.
  EXPECT_TRUE(keep[2]);
  EXPECT_FALSE(keep[1]);
  EXPECT_FALSE(keep[3]);
  EXPECT_EQ(kept_tokens(u, keep), 4);
  // Without a share no name is protected.
  const auto keep0 = select_units(u, BudgetOptions{4, 0.0});
  EXPECT_TRUE(keep0[0]);
  EXPECT_FALSE(keep0[2]);
}

TEST(Budget, PinnedUnitsStayAndSpendNoNameShare) {
  std::vector<Unit> u = flat_units({0.1f, 0.2f, 0.3f, 0.4f, 5, 6, 7, 8, 9, 10});
  u[0].pinned = true;  // in a sentence the question is about: the lowest score, kept
  u[1].pinned = true;
  u[1].name = true;    // a pinned name needs no share ...
  u[2].name = true;    // ... so the share (1 token) still protects this one
  const auto keep = select_units(u, BudgetOptions{4, 0.3});
  EXPECT_TRUE(keep[0]);
  EXPECT_TRUE(keep[1]);
  EXPECT_TRUE(keep[2]);
  EXPECT_EQ(kept_tokens(u, keep), 4);
  // The rest is dropped harder to make room: only the best-scored free unit stays.
  EXPECT_TRUE(keep[9]);
  for (size_t i = 3; i < 9; ++i) EXPECT_FALSE(keep[i]) << i;
}

TEST(Budget, KeepsAllUnderTheTarget) {
  const auto u = flat_units({1, 2, 3});
  EXPECT_EQ(select_units(u, BudgetOptions{3, 0.3}), std::vector<bool>(3, true));
  EXPECT_EQ(select_units(u, BudgetOptions{10, 0.3}), std::vector<bool>(3, true));
}

// SentencePiece-style pieces as token_to_bytes gives them.
TEST(Units, WholeWordsWithTrailingPunctuationApart) {
  const std::vector<std::string> p = {" The", " cat", "'", "s", " Tok", "yo", " trip", ".", "\n", " It", " cost",
                                      " 4", "2", " yen", ",", " U", ".", "S", "."};
  std::vector<float> info(p.size());
  for (size_t i = 0; i < p.size(); ++i) info[i] = static_cast<float>(i);
  std::vector<int32_t> sent(p.size(), 0);
  for (size_t i = 9; i < p.size(); ++i) sent[i] = 1;
  const auto u = make_units(p, info, sent, Granularity::kWord);
  std::vector<std::pair<int32_t, int32_t>> spans;
  for (const Unit& x : u) spans.emplace_back(x.begin, x.end);
  const std::vector<std::pair<int32_t, int32_t>> want = {{0, 1},  {1, 4},   {4, 6},   {6, 7},   {7, 8},  {8, 9},
                                                         {9, 10}, {10, 11}, {11, 13}, {13, 14}, {14, 15}, {15, 18},
                                                         {18, 19}};
  EXPECT_EQ(spans, want);
  EXPECT_FLOAT_EQ(u[1].score, (1 + 2 + 3) / 3.0f);
  EXPECT_FALSE(u[0].name);       // "The" starts its sentence
  EXPECT_TRUE(u[2].name);        // "Tokyo"
  EXPECT_TRUE(u[4].structural);  // "."
  EXPECT_TRUE(u[5].structural);  // the line break
  EXPECT_FALSE(u[6].name);       // "It" starts the second sentence
  EXPECT_TRUE(u[8].name);        // "42"
  EXPECT_FALSE(u[10].structural);  // "," may go
  EXPECT_TRUE(u[11].name);       // "U.S"
  EXPECT_TRUE(u[12].structural);

  const auto t = make_units(p, info, sent, Granularity::kToken);
  ASSERT_EQ(t.size(), p.size());
  EXPECT_TRUE(t[4].name && t[5].name);
  EXPECT_FLOAT_EQ(t[3].score, 3.0f);
}

TEST(Units, NeverSplitACharacterSpelledInBytes) {
  // "caf" + the two bytes of "é" as byte-fallback tokens, then a space.
  const std::vector<std::string> p = {" caf", "\xC3", "\xA9", " ok", "\xE2", "\x80", "\x9D"};
  const std::vector<float> info = {1, 2, 4, 1, 3, 3, 3};
  const std::vector<int32_t> sent(p.size(), 0);
  const auto w = make_units(p, info, sent, Granularity::kWord);
  // Characters are classified whole: the closing quote is punctuation after "ok".
  ASSERT_EQ(w.size(), 3u);
  EXPECT_EQ(w[0].end, 3);
  EXPECT_EQ(w[2].begin, 4);
  EXPECT_EQ(w[2].end, 7);
  EXPECT_FALSE(w[2].structural);
  const auto t = make_units(p, info, sent, Granularity::kToken);
  ASSERT_EQ(t.size(), 4u);  // " caf", "é", " ok", the closing quote
  EXPECT_EQ(t[1].begin, 1);
  EXPECT_EQ(t[1].end, 3);
  EXPECT_FLOAT_EQ(t[1].score, 3.0f);
}

TEST(Units, SpaceMarkerSpelledInBytesIsASpace) {
  // A vocabulary without U+2581 spells SentencePiece's space marker in three bytes.
  const std::vector<std::string> p = {"a", "b", ".", "\xE2", "\x96", "\x81", "c", "d"};
  const std::vector<float> info(p.size(), 1.0f);
  const std::vector<int32_t> sent = {0, 0, 0, 1, 1, 1, 1, 1};
  const auto w = make_units(p, info, sent, Granularity::kWord);
  ASSERT_EQ(w.size(), 3u);
  EXPECT_EQ(w[1].begin, 2);
  EXPECT_TRUE(w[1].structural);  // the period stays apart from the words around it
  EXPECT_EQ(w[2].begin, 3);
}

TEST(Units, OpeningPunctuationCarryingTheSpaceLeadsItsWord) {
  // Qwen spells ` "Yes` as ` "` + `Yes`: apart, dropping the quote would glue "Yes" on.
  const std::vector<std::string> p = {" answered", " \"", "Yes", ",\"", " as"};
  const std::vector<float> info(p.size(), 1.0f);
  const std::vector<int32_t> sent(p.size(), 0);
  const auto w = make_units(p, info, sent, Granularity::kWord);
  ASSERT_EQ(w.size(), 4u);
  EXPECT_EQ(w[1].begin, 1);
  EXPECT_EQ(w[1].end, 3);
  EXPECT_TRUE(w[1].name);  // a word now, capitalized inside its sentence
  EXPECT_EQ(w[2].begin, 3);
}

TEST(Units, LoneIIsNoName) {
  const std::vector<std::string> p = {" so", " I", " went", " I", "'m"};
  const std::vector<float> info(p.size(), 1.0f);
  const std::vector<int32_t> sent(p.size(), 0);
  for (const Unit& x : make_units(p, info, sent, Granularity::kWord)) EXPECT_FALSE(x.name);
}

}  // namespace
}  // namespace pagoda

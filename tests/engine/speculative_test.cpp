// Prompt-lookup drafting, the adaptive draft length and vLLM's --speculative-config JSON
// (engine/speculative.h).
#include "engine/speculative.h"

#include <gtest/gtest.h>

#include <cmath>

#include <vector>

namespace pagoda {
namespace {

std::vector<int32_t> lookup(std::vector<int32_t> tokens, int32_t min_n, int32_t max_n, int32_t k) {
  return propose_ngram(tokens, min_n, max_n, k);
}

TEST(PromptLookup, ContinuesTheMostRecentEarlierOccurrenceOfTheLongestSuffix) {
  // "a b c d" earlier, then "x b c" ... ends with "b c": the longest matching suffix is
  // "b c" (3-gram "y b c" never occurred), most recently followed by "x".
  const std::vector<int32_t> t = {1, 2, 3, 4, 9, 2, 3, 7, 8, 5, 2, 3};
  EXPECT_EQ(propose_ngram(t, 1, 3, 4), (std::vector<int32_t>{7, 8, 5, 2}));
  // Capped at what the history holds after the match.
  EXPECT_EQ(lookup({5, 6, 5}, 1, 3, 4), (std::vector<int32_t>{6, 5}));
  // A longer suffix wins over a more recent shorter one.
  EXPECT_EQ(lookup({1, 2, 3, 8, 3, 9, 1, 2, 3}, 1, 3, 2), (std::vector<int32_t>{8, 3}));
  EXPECT_TRUE(lookup({1, 2, 3, 4}, 1, 3, 4).empty());  // nothing repeats
  EXPECT_TRUE(lookup({1, 2, 1, 2}, 3, 3, 4).empty());  // only shorter suffixes repeat
  EXPECT_TRUE(lookup({1, 1}, 1, 2, 0).empty());
  EXPECT_TRUE(lookup({}, 1, 2, 3).empty());
}

// A tree of continuations (S3): one branch per earlier occurrence, longest suffix first,
// most recent first; the first branch is propose_ngram's chain; shared beginnings are one
// node; parents come before children; the budget caps the nodes.
TEST(PromptLookupTree, MergesTheContinuationsOfSeveralOccurrences) {
  // "2 3" occurs three times before the end: followed by 7 8, 4 9 and 7 5.
  const std::vector<int32_t> t = {2, 3, 7, 5, 1, 2, 3, 4, 9, 6, 2, 3, 7, 8, 0, 2, 3};
  const DraftTree one = propose_ngram_tree(t, 1, 2, 2, 1, 16);
  EXPECT_EQ(one.tokens, propose_ngram(t, 1, 2, 2));
  EXPECT_EQ(one.parent, (std::vector<int32_t>{-1, 0}));
  EXPECT_EQ(one.depth(), 2);
  const DraftTree tree = propose_ngram_tree(t, 1, 2, 2, 3, 16);
  // 7 -> 8 (most recent), 4 -> 9, then 7 -> 5 shares the 7.
  EXPECT_EQ(tree.tokens, (std::vector<int32_t>{7, 8, 4, 9, 5}));
  EXPECT_EQ(tree.parent, (std::vector<int32_t>{-1, 0, -1, 2, 0}));
  EXPECT_EQ(tree.depth(), 2);
  EXPECT_EQ(tree.child(-1, 4), 2);
  EXPECT_EQ(tree.child(0, 5), 4);
  EXPECT_EQ(tree.child(0, 9), -1);
  // Two branches only; and a budget of 3 nodes cuts the second branch short.
  EXPECT_EQ(propose_ngram_tree(t, 1, 2, 2, 2, 16).tokens, (std::vector<int32_t>{7, 8, 4, 9}));
  EXPECT_EQ(propose_ngram_tree(t, 1, 2, 2, 3, 3).tokens, (std::vector<int32_t>{7, 8, 4}));
  // A shorter suffix's matches that a longer one already used add nothing; one that only the
  // shorter suffix matches ("3" alone, followed by 1) is another branch.
  const std::vector<int32_t> u = {3, 1, 2, 3, 6, 2, 3};
  const DraftTree w = propose_ngram_tree(u, 1, 2, 1, 4, 16);
  EXPECT_EQ(w.tokens, (std::vector<int32_t>{6, 1}));
  EXPECT_EQ(w.parent, (std::vector<int32_t>{-1, -1}));
  EXPECT_TRUE(propose_ngram_tree(std::vector<int32_t>{1, 2, 3}, 1, 2, 4, 3, 16).tokens.empty());
  for (const DraftTree& d : {one, tree, w})
    for (size_t i = 0; i < d.size(); ++i) EXPECT_LT(d.parent[i], static_cast<int32_t>(i));
}

TEST(DraftLength, GrowsWhileAllIsAcceptedAndBacksOffWhenNothingIs) {
  DraftState d;
  d.update(6, 6, 6);
  EXPECT_EQ(d.length, 6);  // starts at the most, never above it
  d.length = 4;
  d.update(4, 4, 6);
  EXPECT_EQ(d.length, 5);
  d.update(5, 2, 6);
  EXPECT_EQ(d.length, 3);
  EXPECT_EQ(d.skip, 0);
  d.update(3, 0, 6);
  EXPECT_EQ(d.skip, 0);  // one miss is noise
  d.update(1, 0, 6);
  EXPECT_GT(d.skip, 0);  // two in a row: stop drafting for a while
  const int32_t first = d.skip;
  d.skip = 0;
  d.update(1, 0, 6);
  EXPECT_GT(d.skip, first);  // longer each time
  d.update(1, 1, 6);
  EXPECT_EQ(d.misses, 0);
}

// The draft model's cost gate: the expected tokens per step over the step's cost in
// target steps. Measured on Qwen2.5-Coder (docs/speculative.md): the 0.5B drafting for
// the 1.5B costs about 0.4 of a target step per token and 82% of its drafts are
// accepted (1.32x measured); a Q2_K copy of the 1.5B costs about a whole step per token
// (0.54x measured before the gate).
TEST(DraftCostGate, DraftsOnlyAsManyTokensAsPayForTheirTime) {
  EXPECT_DOUBLE_EQ(draft_speedup(1.0, 0.0, 4), 5.0);  // free and always right: k + 1 tokens a step
  EXPECT_DOUBLE_EQ(draft_speedup(0.0, 0.5, 3), 1.0 / 2.5);
  EXPECT_NEAR(draft_speedup(0.82, 0.4, 4), (1 + 0.82 + 0.82 * 0.82 + std::pow(0.82, 3) + std::pow(0.82, 4)) / 2.6,
              1e-12);
  EXPECT_GT(paying_draft_length(0.82, 0.4, 4), 0);
  EXPECT_EQ(paying_draft_length(0.67, 1.0, 4), 0);  // a draft as slow as the target never pays
  EXPECT_EQ(paying_draft_length(0.99, 1.0, 16), 0);
  EXPECT_EQ(paying_draft_length(0.3, 0.4, 4), 0);   // (1 + 0.3) / 1.4 < 1
  EXPECT_EQ(paying_draft_length(0.95, 0.0, 6), 6);  // prompt lookup's near-free drafts: all of them
  // Cheap but doubtful drafts: only the first ones pay.
  const int32_t k = paying_draft_length(0.6, 0.25, 8);
  EXPECT_GT(k, 0);
  EXPECT_LT(k, 8);
  for (int32_t other = 1; other <= 8; ++other) EXPECT_GE(draft_speedup(0.6, 0.25, k), draft_speedup(0.6, 0.25, other));
}

TEST(DraftCostGate, AcceptanceFollowsRecentSteps) {
  DraftState d;
  EXPECT_DOUBLE_EQ(d.acceptance(), 0.5);  // the prior
  for (int i = 0; i < 20; ++i) d.update(4, 4, 4);
  EXPECT_GT(d.acceptance(), 0.9);
  for (int i = 0; i < 20; ++i) d.update(4, 0, 4);
  EXPECT_LT(d.acceptance(), 0.3);  // old steps fade (weight 0.875 a step: 7% after 20)
  DraftState half;
  for (int i = 0; i < 40; ++i) half.update(4, 1, 4);  // one accepted, then a rejection
  EXPECT_NEAR(half.acceptance(), 0.5, 0.05);
}

TEST(SpeculativeConfigJson, ReadsVllmsKeysAndNamesWhatIsWrong) {
  auto c = parse_speculative_config(R"({"method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_max": 3})");
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_TRUE(c->enabled());
  EXPECT_EQ(c->num_speculative_tokens, 5);
  EXPECT_EQ(c->prompt_lookup_max, 3);
  EXPECT_EQ(c->prompt_lookup_min, 1);
  auto message = [](const char* json) {
    auto r = parse_speculative_config(json);
    return r.is_ok() ? std::string() : r.status().message();
  };
  EXPECT_NE(message(R"({"method": "eagle", "num_speculative_tokens": 2})").find("\"eagle\" is not supported"),
            std::string::npos);
  EXPECT_NE(message(R"({"method": "ngram"})").find("num_speculative_tokens is required"), std::string::npos);
  EXPECT_NE(message(R"({"method": "ngram", "num_speculative_tokens": 0})").find("integer in 1..32"), std::string::npos);
  EXPECT_NE(message(R"({"method": "ngram", "num_speculative_tokens": 2, "model": "x"})").find("\"model\" is for the draft_model method"),
            std::string::npos);
  EXPECT_NE(message(R"({"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_min": 5,
                        "prompt_lookup_max": 2})")
                .find("prompt_lookup_min 5 is more than prompt_lookup_max 2"),
            std::string::npos);
  EXPECT_NE(message(R"({"method": "draft_model", "num_speculative_tokens": 2})").find("needs \"model\""),
            std::string::npos);
  auto tree = parse_speculative_config(R"({"method": "ngram", "num_speculative_tokens": 4, "branches": 3})");
  ASSERT_TRUE(tree.is_ok()) << tree.status().message();
  EXPECT_EQ(tree->branches, 3);
  EXPECT_EQ(c->branches, 1);
  auto draft_tree = parse_speculative_config(R"({"model": "d.gguf", "num_speculative_tokens": 4, "branches": 2})");
  ASSERT_TRUE(draft_tree.is_ok()) << draft_tree.status().message();
  EXPECT_EQ(draft_tree->branches, 2);
  EXPECT_NE(message(R"({"method": "ngram", "num_speculative_tokens": 16, "branches": 4})").find("at most 63"),
            std::string::npos);
  EXPECT_NE(message(R"({"method": "ngram", "num_speculative_tokens": 4, "branches": 9})").find("integer in 1..8"),
            std::string::npos);
  EXPECT_NE(message("[1]").find("JSON object"), std::string::npos);
  EXPECT_NE(message("{").find("not JSON"), std::string::npos);
}

}  // namespace
}  // namespace pagoda

#include "compress/relevance.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace pagoda {
namespace {

TEST(Relevance, TheSentenceAQuestionQuotesRanksFirst) {
  const std::string text =
      "The train left the station at noon. Kiyo waited in the rain for an hour. "
      "The rain stopped and the train came back. Nobody in the town knew the teacher.";
  const auto spans = split_sentences(text);
  ASSERT_EQ(spans.size(), 4u);
  const auto r = sentence_relevance(text, spans, "Who waited in the rain for an hour?");
  ASSERT_EQ(r.size(), 4u);
  for (size_t s : {0u, 2u, 3u}) EXPECT_GT(r[1], r[s]) << s;
  // "rain" is in two sentences, "the" in all four: the third shares only those.
  EXPECT_GT(r[2], 0.0);
  EXPECT_GT(r[1], 2 * r[2]);
}

TEST(Relevance, WordsOfEverySentenceWeighLittleAndUnsharedWordsNothing) {
  const std::string text = "the cat sat. the dog ran. the bird sang.";
  const auto spans = split_sentences(text);
  const auto common = sentence_relevance(text, spans, "the");
  const auto rare = sentence_relevance(text, spans, "dog");
  EXPECT_LT(common[1], 0.25 * rare[1]);
  EXPECT_EQ(rare[0], 0.0);
  EXPECT_EQ(rare[2], 0.0);
  // Case and punctuation do not matter; a repeated question word counts once.
  EXPECT_DOUBLE_EQ(sentence_relevance(text, spans, "DOG? dog, Dog!")[1], rare[1]);
  EXPECT_EQ(sentence_relevance(text, spans, "").size(), 3u);
  EXPECT_EQ(sentence_relevance(text, spans, "")[1], 0.0);
}

TEST(Relevance, PicksTheBestWithinTheBudgetAndTheFloor) {
  const std::vector<double> r = {1.0, 8.0, 5.0, 3.9, 0.0, 7.0};
  const std::vector<int32_t> sizes = {10, 30, 10, 10, 5, 50};
  // Best first: 8 (30 tokens), then 7 does not fit 40 - 30 and 5 does; 3.9 is under half
  // the best.
  EXPECT_EQ(pick_sentences(r, sizes, 40), (std::vector<bool>{false, true, true, false, false, false}));
  EXPECT_EQ(pick_sentences(r, sizes, 1000), (std::vector<bool>{false, true, true, false, false, true}));
  EXPECT_EQ(pick_sentences(r, sizes, 1000, 0.0), (std::vector<bool>{true, true, true, true, false, true}));
  EXPECT_EQ(pick_sentences(r, sizes, 0), std::vector<bool>(6, false));
  EXPECT_EQ(pick_sentences(std::vector<double>(3, 0.0), std::vector<int32_t>(3, 1), 10), std::vector<bool>(3, false));
}

TEST(Relevance, WordsAreLowerCasedAsciiRunsAndOtherScripts) {
  EXPECT_EQ(text_words("Kanda-ku, 600 yen; naïve"), (std::vector<std::string>{"kanda", "ku", "600", "yen", "naïve"}));
  EXPECT_TRUE(text_words(" ,.- ").empty());
}

}  // namespace
}  // namespace pagoda

#include "compress/segments.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace pagoda {
namespace {

std::vector<std::string> sentences(const std::string& t) {
  std::vector<std::string> out;
  size_t at = 0;
  for (const ByteSpan& s : split_sentences(t)) {
    EXPECT_EQ(s.begin, at) << "sentences must cover the text end to end";
    at = s.end;
    out.push_back(t.substr(s.begin, s.end - s.begin));
  }
  EXPECT_EQ(at, t.size());
  return out;
}

TEST(Segments, SplitsSentencesAtFinalPunctuation) {
  EXPECT_EQ(sentences("One. Two! Three? Four"), (std::vector<std::string>{"One.", " Two!", " Three?", " Four"}));
  EXPECT_EQ(sentences("He said \"go.\" Then left."), (std::vector<std::string>{"He said \"go.\"", " Then left."}));
  EXPECT_EQ(sentences("Mr. Red met Dr. Blue. Done"), (std::vector<std::string>{"Mr. Red met Dr. Blue.", " Done"}));
  EXPECT_EQ(sentences("3.14 is pi. Yes"), (std::vector<std::string>{"3.14 is pi.", " Yes"}));
  EXPECT_EQ(sentences("Wait... what?!  Ok"), (std::vector<std::string>{"Wait...", " what?!", "  Ok"}));
  EXPECT_EQ(sentences("Chapter I\n\nIt began"), (std::vector<std::string>{"Chapter I", "\n\nIt began"}));
  EXPECT_EQ(sentences("It ended.\xE2\x80\x9D Then"), (std::vector<std::string>{"It ended.\xE2\x80\x9D", " Then"}));
  EXPECT_TRUE(split_sentences("").empty());
}

TEST(Segments, QuestionIsTheLastParagraph) {
  PromptParts p = split_prompt("  Context one.\nStill context.\n\n  \nWhat is it?\n");
  EXPECT_EQ(p.instruction, "");
  EXPECT_EQ(p.context, "Context one.\nStill context.");
  EXPECT_EQ(p.question, "What is it?");
  p = split_prompt("Just one paragraph. With two sentences?");
  EXPECT_EQ(p.context, "Just one paragraph. With two sentences?");
  EXPECT_EQ(p.question, "");
  p = split_prompt("\n\nOnly a question?");
  EXPECT_EQ(p.context, "Only a question?");
}

TEST(Segments, JoinSkipsEmptyParts) {
  EXPECT_EQ(join_prompt(PromptParts{"Do this.", "ctx", "Why?"}), "Do this.\n\nctx\n\nWhy?");
  EXPECT_EQ(join_prompt(PromptParts{"", "ctx", "Why?"}), "ctx\n\nWhy?");
  EXPECT_EQ(join_prompt(PromptParts{"", "ctx", ""}), "ctx");
}

}  // namespace
}  // namespace pagoda

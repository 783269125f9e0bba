// Reasoning split (chat/reasoning_split.h): <think> text goes to the reasoning, the rest
// to the content, the same for every way the reply is cut into pieces.
#include "chat/reasoning_split.h"

#include <gtest/gtest.h>

#include <string>

namespace pagoda {
namespace {

ReasoningSplitter::Piece split(const std::string& reply, size_t piece, bool starts_inside = false,
                               bool enabled = true) {
  ReasoningSplitter s(enabled, starts_inside);
  ReasoningSplitter::Piece all;
  for (size_t i = 0; i < reply.size(); i += piece) {
    auto p = s.feed(reply.substr(i, piece));
    all.reasoning += p.reasoning;
    all.content += p.content;
  }
  auto p = s.finish();
  all.reasoning += p.reasoning;
  all.content += p.content;
  return all;
}

TEST(ReasoningSplit, ThinkBlockIsReasoningForEveryCut) {
  const std::string reply = "\n<think>\nLet me see: 2 < 3, so </thin is not the end.\n</think>\n\nYes.";
  for (size_t piece = 1; piece <= reply.size(); ++piece) {
    auto p = split(reply, piece);
    EXPECT_EQ(p.reasoning, "\nLet me see: 2 < 3, so </thin is not the end.\n") << piece;
    EXPECT_EQ(p.content, "Yes.") << piece;
  }
}

TEST(ReasoningSplit, APromptThatOpenedTheThoughtStartsInside) {
  auto p = split("pondering</think>answer", 3, /*starts_inside=*/true);
  EXPECT_EQ(p.reasoning, "pondering");
  EXPECT_EQ(p.content, "answer");
  EXPECT_TRUE(prompt_opens_reasoning("<|im_start|>assistant\n<think>\n"));
  EXPECT_FALSE(prompt_opens_reasoning("<|im_start|>assistant\n<think>\n\n</think>\n\n"));
  EXPECT_FALSE(prompt_opens_reasoning("<|im_start|>assistant\n"));
}

TEST(ReasoningSplit, AReplyWithoutThinkIsContentAndACutThoughtIsReasoning) {
  EXPECT_EQ(split("<thin>no", 2).content, "<thin>no");
  EXPECT_EQ(split("  plain <think> later", 4).content, "  plain <think> later");
  auto cut = split("<think>still thinking </thi", 5);
  EXPECT_EQ(cut.reasoning, "still thinking </thi");
  EXPECT_EQ(cut.content, "");
  EXPECT_EQ(split("<think>a</think>b", 1, false, /*enabled=*/false).content, "<think>a</think>b");
}

TEST(ReasoningSplit, FormatNamesAndTemplateDetection) {
  ReasoningFormat f;
  EXPECT_TRUE(parse_reasoning_format("deepseek", f));
  EXPECT_EQ(f, ReasoningFormat::kDeepSeek);
  EXPECT_TRUE(parse_reasoning_format("none", f));
  EXPECT_FALSE(parse_reasoning_format("deepseek-legacy", f));
  EXPECT_TRUE(template_has_reasoning("{% if '</think>' in content %}"));
  EXPECT_FALSE(template_has_reasoning("{{ messages }}"));
}

}  // namespace
}  // namespace pagoda

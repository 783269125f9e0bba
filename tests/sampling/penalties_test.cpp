#include <gtest/gtest.h>

#include <vector>

#include "sampling/penalties.h"
#include "sampling/reference_chain.h"
#include "sampling/sampler.h"

namespace pagoda {
namespace {

std::vector<float> penalized(std::vector<float> logits, const std::vector<int32_t>& history,
                             const SamplingParams& p) {
  std::vector<int32_t> scratch;
  apply_penalties(logits, history, p, scratch);
  return logits;
}

TEST(Penalties, RepeatPenaltyDividesPositiveAndMultipliesNegative) {
  auto p = testing::plain_params();
  p.repeat_penalty = 2.0f;
  // Token 1 twice, token 9 outside the vocabulary, -1 invalid: both ignored.
  const std::vector<int32_t> history = {0, 1, 1, 3, 9, -1};
  EXPECT_EQ(penalized({1.0f, -1.0f, 2.0f, 0.5f, 3.0f}, history, p),
            (std::vector<float>{0.5f, -2.0f, 2.0f, 0.25f, 3.0f}));
}

TEST(Penalties, FrequencyAndPresenceAsOpenAI) {
  auto p = testing::plain_params();
  p.frequency_penalty = 0.25f;
  p.presence_penalty = 0.5f;
  const std::vector<int32_t> history = {2, 0, 2, 2};
  // Token 0 once: -(0.25 + 0.5); token 2 three times: -(0.75 + 0.5).
  EXPECT_EQ(penalized({1.0f, 1.0f, 1.0f}, history, p),
            (std::vector<float>{0.25f, 1.0f, -0.25f}));
}

TEST(Penalties, RepeatThenFrequencyAndPresence) {
  auto p = testing::plain_params();
  p.repeat_penalty = 2.0f;
  p.frequency_penalty = 0.25f;
  p.presence_penalty = 0.5f;
  const std::vector<int32_t> history = {0, 1, 1};
  // 3 / 2 - (0.25 + 0.5) = 0.75; -1 * 2 - (0.5 + 0.5) = -3.
  EXPECT_EQ(penalized({3.0f, -1.0f, 4.0f}, history, p), (std::vector<float>{0.75f, -3.0f, 4.0f}));
}

TEST(Penalties, WindowIsTheLastNTokens) {
  auto p = testing::plain_params();
  p.presence_penalty = 1.0f;
  const std::vector<int32_t> history = {0, 1, 2, 1};
  const std::vector<float> logits = {0.0f, 0.0f, 0.0f, 0.0f};
  p.repeat_last_n = 2;  // sees {2, 1}
  EXPECT_EQ(penalized(logits, history, p), (std::vector<float>{0.0f, -1.0f, -1.0f, 0.0f}));
  p.repeat_last_n = -1;  // the whole history
  EXPECT_EQ(penalized(logits, history, p), (std::vector<float>{-1.0f, -1.0f, -1.0f, 0.0f}));
  p.repeat_last_n = 0;  // off
  EXPECT_EQ(penalized(logits, history, p), logits);
  p.repeat_last_n = 100;  // longer than the history
  EXPECT_EQ(penalized(logits, history, p), (std::vector<float>{-1.0f, -1.0f, -1.0f, 0.0f}));
}

TEST(Penalties, OffByDefault) {
  const SamplingParams p;
  const std::vector<float> logits = {1.0f, -1.0f};
  EXPECT_EQ(penalized(logits, {0, 1, 0}, p), logits);
}

TEST(Penalties, SamplerAppliesThemInPlaceBeforeTheFilters) {
  auto p = testing::plain_params();
  p.repeat_penalty = 4.0f;
  p.top_k = 1;
  Sampler s(p);
  std::vector<float> logits = {2.0f, 1.0f};
  const std::vector<int32_t> history = {0};
  EXPECT_EQ(s.sample(logits, history), 1);  // 2 / 4 = 0.5 now loses to 1
  EXPECT_EQ(logits, (std::vector<float>{0.5f, 1.0f}));
}

}  // namespace
}  // namespace pagoda

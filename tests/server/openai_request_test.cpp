// Parsing and validating OpenAI request bodies: defaults as OpenAI documents them, every
// accepted prompt shape, and a 400 naming the field for each wrong type or range.
#include "server/openai_request.h"

#include <gtest/gtest.h>

#include <variant>

namespace pagoda {
namespace {

// The content of message i as the template will see it.
std::string content(const ApiRequest& r, size_t i) {
  return r.chat_input.messages.items().at(i).dict().find("content")->str();
}

ApiRequest ok(const std::string& body, bool chat = false) {
  auto r = parse_api_request(body, chat);
  if (auto* e = std::get_if<ApiError>(&r)) ADD_FAILURE() << e->message;
  return std::holds_alternative<ApiRequest>(r) ? std::get<ApiRequest>(r) : ApiRequest{};
}

ApiError bad(const std::string& body, bool chat = false) {
  auto r = parse_api_request(body, chat);
  EXPECT_TRUE(std::holds_alternative<ApiError>(r)) << body;
  return std::holds_alternative<ApiError>(r) ? std::get<ApiError>(r) : ApiError{};
}

TEST(OpenAiRequest, CompletionDefaultsFollowOpenAi) {
  const ApiRequest r = ok(R"({"prompt": "hi"})");
  EXPECT_EQ(r.params.max_tokens, 16);
  EXPECT_FLOAT_EQ(r.params.sampling.temperature, 1.0f);
  EXPECT_FLOAT_EQ(r.params.sampling.top_p, 1.0f);
  EXPECT_EQ(r.params.sampling.top_k, 0);
  EXPECT_EQ(r.params.n, 1);
  EXPECT_EQ(r.params.logprobs, -1);
  EXPECT_EQ(r.params.sampling.seed, kRandomSeed);
  EXPECT_FALSE(r.stream);
}

TEST(OpenAiRequest, ChatHasNoDefaultTokenLimit) {
  const ApiRequest r = ok(R"({"messages": [{"role": "user", "content": "hi"}]})", true);
  EXPECT_LT(r.params.max_tokens, 0);
  ASSERT_EQ(r.chat_input.messages.items().size(), 1u);
  EXPECT_EQ(content(r, 0), "hi");
}

TEST(OpenAiRequest, AcceptsEveryPromptShape) {
  EXPECT_EQ(ok(R"({"prompt": "a"})").prompts.size(), 1u);
  EXPECT_EQ(ok(R"({"prompt": ["a", "b"]})").prompts.size(), 2u);
  const ApiRequest ids = ok(R"({"prompt": [1, 2, 3]})");
  ASSERT_EQ(ids.prompts.size(), 1u);
  EXPECT_EQ(std::get<std::vector<int32_t>>(ids.prompts[0]).size(), 3u);
  EXPECT_EQ(ok(R"({"prompt": [[1, 2], [3]]})").prompts.size(), 2u);
}

TEST(OpenAiRequest, ChatContentPartsAreJoined) {
  const ApiRequest r = ok(
      R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]})",
      true);
  EXPECT_EQ(content(r, 0), "ab");
}

TEST(OpenAiRequest, SamplingFieldsAndExtensionsAreRead) {
  const ApiRequest r = ok(
      R"({"prompt": "x", "max_tokens": 5, "temperature": 0, "top_p": 0.5, "top_k": 7, "min_p": 0.1, "n": 3,
          "seed": 9, "stop": ["a", "b"], "presence_penalty": 1, "frequency_penalty": -1, "logprobs": 2,
          "stream": true, "stream_options": {"include_usage": true}, "ignore_eos": true, "unknown": 1})");
  EXPECT_EQ(r.params.max_tokens, 5);
  EXPECT_FLOAT_EQ(r.params.sampling.temperature, 0.0f);
  EXPECT_EQ(r.params.sampling.top_k, 7);
  EXPECT_EQ(r.params.n, 3);
  EXPECT_EQ(r.params.sampling.seed, 9u);
  EXPECT_EQ(r.stop.size(), 2u);
  EXPECT_EQ(r.params.logprobs, 2);
  EXPECT_TRUE(r.stream && r.include_usage && r.params.ignore_eos);
}

TEST(OpenAiRequest, ChatLogprobsNeedTheFlag) {
  EXPECT_EQ(ok(R"({"messages": [{"role": "user", "content": "x"}], "logprobs": true, "top_logprobs": 4})", true)
                .params.logprobs,
            4);
  EXPECT_EQ(bad(R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 4})", true).param, "top_logprobs");
}

TEST(OpenAiRequest, EachBadFieldIsA400NamingIt) {
  EXPECT_EQ(bad("{oops").status, 400);
  EXPECT_EQ(bad("[1, 2]").status, 400);
  EXPECT_EQ(bad(R"({"max_tokens": 3})").param, "prompt");
  EXPECT_EQ(bad(R"({"prompt": 5})").param, "prompt");
  EXPECT_EQ(bad(R"({"prompt": [1, "a"]})").param, "prompt");
  EXPECT_EQ(bad(R"({"prompt": "x", "temperature": "hot"})").param, "temperature");
  EXPECT_EQ(bad(R"({"prompt": "x", "temperature": 2.5})").param, "temperature");
  EXPECT_EQ(bad(R"({"prompt": "x", "max_tokens": -1})").param, "max_tokens");
  EXPECT_EQ(bad(R"({"prompt": "x", "max_tokens": 2.5})").param, "max_tokens");
  EXPECT_EQ(bad(R"({"prompt": "x", "n": 0})").param, "n");
  EXPECT_EQ(bad(R"({"prompt": "x", "top_p": 0})").param, "top_p");
  EXPECT_EQ(bad(R"({"prompt": "x", "stop": [1]})").param, "stop");
  EXPECT_EQ(bad(R"({"prompt": "x", "stream": 1})").param, "stream");
  EXPECT_EQ(bad(R"({"messages": "hi"})", true).param, "messages");
  EXPECT_EQ(bad(R"({"messages": [{"content": "x"}]})", true).param, "messages");
}

TEST(OpenAiRequest, ErrorBodyHasOpenAisShape) {
  const std::string body = bad(R"({"prompt": "x", "n": 0})").body();
  EXPECT_NE(body.find(R"("error":)"), std::string::npos);
  EXPECT_NE(body.find(R"("type":"invalid_request_error")"), std::string::npos);
  EXPECT_NE(body.find(R"("param":"n")"), std::string::npos);
  EXPECT_NE(body.find(R"("code":null)"), std::string::npos);
}

std::string many_prompts(int count, const std::string& extra) {
  std::string b = R"({"prompt": [)";
  for (int i = 0; i < count; ++i) b += (i ? ",\"p" : "\"p") + std::to_string(i) + "\"";
  return b + "]" + extra + "}";
}

ApiError over(const std::string& body, const RequestLimits& limits, bool chat = false) {
  auto r = parse_api_request(body, chat, &limits);
  EXPECT_TRUE(std::holds_alternative<ApiError>(r)) << body;
  return std::holds_alternative<ApiError>(r) ? std::get<ApiError>(r) : ApiError{};
}

// The issue's amplification request: ~700 bytes asking for 8,192 sequences.
TEST(OpenAiRequestLimits, AmplificationIsA400NamingTheLimit) {
  const RequestLimits limits;
  const ApiError e = over(many_prompts(64, R"(, "n": 128, "max_tokens": 2)"), limits);
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.param, "n");
  EXPECT_NE(e.message.find("8192"), std::string::npos) << e.message;
  EXPECT_NE(e.message.find("--max-seqs-per-request"), std::string::npos) << e.message;
}

TEST(OpenAiRequestLimits, PromptCountIsBounded) {
  RequestLimits limits;
  limits.max_prompts = 4;
  const ApiError e = over(many_prompts(5, ""), limits);
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.param, "prompt");
  EXPECT_NE(e.message.find("--max-prompts-per-request"), std::string::npos) << e.message;
  auto at = parse_api_request(many_prompts(4, ""), false, &limits);
  EXPECT_TRUE(std::holds_alternative<ApiRequest>(at));
}

TEST(OpenAiRequestLimits, NIsBoundedByTheFlagNotTheParser) {
  RequestLimits limits;
  limits.max_n = 8;
  const ApiError e = over(R"({"prompt": "x", "n": 9})", limits);
  EXPECT_EQ(e.param, "n");
  EXPECT_NE(e.message.find("--max-n"), std::string::npos) << e.message;
  EXPECT_NE(over(R"({"prompt": "x", "n": 129})", RequestLimits{}).message.find("--max-n"), std::string::npos);
  // Within the limits every count passes, and chat counts as one prompt.
  auto r = parse_api_request(R"({"messages": [{"role": "user", "content": "x"}], "n": 8})", true, &limits);
  EXPECT_TRUE(std::holds_alternative<ApiRequest>(r));
}

TEST(OpenAiRequestLimits, SequencesArePromptsTimesN) {
  RequestLimits limits;
  limits.max_sequences = 12;
  EXPECT_TRUE(std::holds_alternative<ApiRequest>(parse_api_request(many_prompts(3, R"(, "n": 4)"), false, &limits)));
  const ApiError e = over(many_prompts(3, R"(, "n": 5)"), limits);
  EXPECT_EQ(e.param, "n");
  EXPECT_NE(e.message.find("15 sequences"), std::string::npos) << e.message;
}

TEST(OpenAiRequestLimits, TokensCountPromptAndCompletionTimesN) {
  RequestLimits limits;
  limits.max_tokens = 100;
  ApiRequest r = ok(R"({"prompt": "x", "n": 4, "max_tokens": 20})");
  const std::vector<std::vector<int32_t>> five(1, std::vector<int32_t>(5, 1));
  EXPECT_FALSE(check_request_tokens(r, five, 20, 1000, limits));  // (5 + 20) x 4 = 100
  r.params.n = 5;
  const auto e = check_request_tokens(r, five, 20, 1000, limits);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param, "max_tokens");
  EXPECT_NE(e->message.find("--max-request-tokens"), std::string::npos) << e->message;
  // Without max_tokens a sample may fill the context.
  ApiRequest chat = ok(R"({"messages": [{"role": "user", "content": "x"}]})", true);
  EXPECT_TRUE(check_request_tokens(chat, five, -1, 101, limits));
  EXPECT_FALSE(check_request_tokens(chat, five, -1, 100, limits));
  limits.max_tokens = 0;
  EXPECT_FALSE(check_request_tokens(chat, five, -1, 1 << 30, limits));
}

}  // namespace
}  // namespace pagoda

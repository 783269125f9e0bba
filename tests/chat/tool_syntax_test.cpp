// Tool-call syntaxes (chat/tool_syntax.h): calls read back from replies in each family's
// syntax, content released while it streams and held from the opener on, the same
// result for any split of the reply, and the structural tag that tool_choice compiles to.
#include "chat/tool_syntax.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace pagoda {
namespace {

struct Read {
  std::string streamed;  // content released by feed()
  ToolCallExtractor::Final final;
};

Read read_in_pieces(const ToolSyntax* syntax, const std::string& reply, size_t piece) {
  ToolCallExtractor x(syntax);
  Read r;
  for (size_t i = 0; i < reply.size(); i += piece) r.streamed += x.feed(reply.substr(i, piece));
  r.final = x.finish();
  return r;
}

const ToolSyntax& hermes() { return *find_tool_syntax("hermes"); }
const ToolSyntax& llama3() { return *find_tool_syntax("llama3_json"); }
const ToolSyntax& mistral() { return *find_tool_syntax("mistral"); }

TEST(ToolSyntax, DetectsTheFamilyFromTheTemplate) {
  EXPECT_EQ(detect_tool_syntax("{% if tools %}<tool_call>{{ tools | tojson }}{% endif %}"), &hermes());
  EXPECT_EQ(detect_tool_syntax("{% if tools %}<|python_tag|>{% endif %}"), &llama3());
  EXPECT_EQ(detect_tool_syntax("{% if tools %}[AVAILABLE_TOOLS]{{ tools | tojson }}[/AVAILABLE_TOOLS]{% endif %}"
                               "{{ '[TOOL_CALLS]' + (m.tool_calls | tojson) }}"),
            &mistral());
  // The later name[ARGS]{...} syntax decodes to unmarked text: not taken for this one.
  EXPECT_EQ(detect_tool_syntax("{% if tools %}{{ '[TOOL_CALLS]' + name + '[ARGS]' + args }}{% endif %}"), nullptr);
  EXPECT_EQ(detect_tool_syntax("{{ messages[0].content }}"), nullptr);
  // A template that never reads `tools` renders none, whatever else it mentions.
  EXPECT_EQ(detect_tool_syntax("<tool_call>"), nullptr);
}

TEST(ToolSyntax, HermesCallsAreReadWithTheirArguments) {
  const std::string reply =
      "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"get_time\", \"arguments\": \"{\\\"tz\\\": \\\"UTC\\\"}\"}\n</tool_call>";
  for (size_t piece : {1, 2, 3, 7, 1000}) {
    Read r = read_in_pieces(&hermes(), reply, piece);
    EXPECT_EQ(r.streamed + r.final.content, "Let me check.\n") << piece;
    ASSERT_EQ(r.final.calls.size(), 2u) << piece;
    EXPECT_EQ(r.final.calls[0].name, "get_weather");
    EXPECT_EQ(nlohmann::json::parse(r.final.calls[0].arguments), nlohmann::json({{"city", "Paris"}}));
    EXPECT_EQ(r.final.calls[1].name, "get_time");
    EXPECT_EQ(nlohmann::json::parse(r.final.calls[1].arguments), nlohmann::json({{"tz", "UTC"}}));
  }
}

TEST(ToolSyntax, TextThatOnlyLooksLikeAnOpenerIsContent) {
  for (const std::string& reply : {std::string("a <tool_ca b"), std::string("ends with <tool_c"),
                                  std::string("<tool_call>not json</tool_call>")}) {
    for (size_t piece : {1, 4, 1000}) {
      Read r = read_in_pieces(&hermes(), reply, piece);
      EXPECT_EQ(r.streamed + r.final.content, reply) << piece;
      EXPECT_TRUE(r.final.calls.empty());
    }
  }
  // Content is not held longer than it has to be: only a possible opener's prefix waits.
  ToolCallExtractor x(&hermes());
  EXPECT_EQ(x.feed("hello <tool"), "hello ");
  EXPECT_EQ(x.feed("box>"), "<toolbox>");
}

TEST(ToolSyntax, ACallCutBeforeItsClosingTagStillCounts) {
  Read r = read_in_pieces(&hermes(), "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}", 3);
  ASSERT_EQ(r.final.calls.size(), 1u);
  EXPECT_EQ(r.final.calls[0].arguments, "{}");
  // Cut inside a second call: the first stands.
  Read two = read_in_pieces(&hermes(), "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"na", 4);
  ASSERT_EQ(two.final.calls.size(), 1u);
  EXPECT_EQ(two.final.calls[0].name, "f");
}

TEST(ToolSyntax, Llama3CallsAreBareJsonAtTheStartOnly) {
  const std::string reply = "  {\"name\": \"f\", \"parameters\": {\"x\": \"}{\"}}; {\"name\": \"g\", \"parameters\": {}}";
  for (size_t piece : {1, 5, 1000}) {
    Read r = read_in_pieces(&llama3(), reply, piece);
    EXPECT_EQ(r.streamed + r.final.content, "") << piece;
    ASSERT_EQ(r.final.calls.size(), 2u) << piece;
    EXPECT_EQ(nlohmann::json::parse(r.final.calls[0].arguments), nlohmann::json({{"x", "}{"}}));
    EXPECT_EQ(r.final.calls[1].name, "g");
  }
  Read text = read_in_pieces(&llama3(), "The JSON is {\"name\": \"f\"}", 2);
  EXPECT_EQ(text.streamed + text.final.content, "The JSON is {\"name\": \"f\"}");
  EXPECT_TRUE(text.final.calls.empty());
}

TEST(ToolSyntax, MistralCallsAreOneJsonArrayAtTheStart) {
  // [TOOL_CALLS] decodes to nothing; written out as text it counts too.
  for (const std::string& marker : {std::string(""), std::string("[TOOL_CALLS]")}) {
    const std::string reply = marker + "[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}, "
                                       "\"id\": \"a1B2c3D4e\"}, {\"name\": \"get_time\", \"arguments\": {}}]";
    for (size_t piece : {1, 3, 1000}) {
      Read r = read_in_pieces(&mistral(), reply, piece);
      EXPECT_EQ(r.streamed + r.final.content, "") << piece;
      ASSERT_EQ(r.final.calls.size(), 2u) << piece;
      EXPECT_EQ(r.final.calls[0].name, "get_weather");
      EXPECT_EQ(r.final.calls[0].id, "a1B2c3D4e");  // a valid Mistral id is kept
      EXPECT_EQ(nlohmann::json::parse(r.final.calls[0].arguments), nlohmann::json({{"city", "Paris"}}));
      EXPECT_EQ(r.final.calls[1].id, "");  // the server gives it 9 letters and digits
    }
  }
  // Cut inside its second call: the first stands.
  Read cut = read_in_pieces(&mistral(), "[{\"name\": \"f\", \"arguments\": {\"a\": 1}}, {\"name\": \"g\", \"argu", 4);
  ASSERT_EQ(cut.final.calls.size(), 1u);
  EXPECT_EQ(cut.final.calls[0].name, "f");
  for (const std::string& text : {std::string("[1] is a citation"), std::string("Sure: [{\"name\": \"f\"}]"),
                                  std::string("[{not json}]")}) {
    Read r = read_in_pieces(&mistral(), text, 2);
    EXPECT_EQ(r.streamed + r.final.content, text);
    EXPECT_TRUE(r.final.calls.empty()) << text;
  }
  EXPECT_EQ(mistral().id_length, 9);
}

TEST(ToolSyntax, MistralRequiredCallsAreWrappedInOneArray) {
  const std::vector<ToolDef> tools = {{"f", ""}, {"g", ""}};
  auto tag = tool_call_structural_tag(mistral(), tools, ToolChoice::kRequired, "", /*parallel=*/true);
  ASSERT_TRUE(tag) << tag.status().message();
  const auto j = nlohmann::json::parse(*tag);
  ASSERT_EQ(j["format"]["type"], "sequence");
  EXPECT_EQ(j["format"]["elements"][0]["value"], "[");
  EXPECT_EQ(j["format"]["elements"][1]["type"], "tags_with_separator");
  EXPECT_EQ(j["format"]["elements"][1]["separator"], ", ");
  EXPECT_EQ(j["format"]["elements"][1]["tags"][0]["begin"], "{\"name\": \"f\", \"arguments\": ");
  EXPECT_EQ(j["format"]["elements"][2]["value"], "]");
}

// The pieces a reply streams into, fed `piece` bytes at a time: per call its name and its
// joined arguments, and how many pieces of arguments came before the reply ended.
struct Streamed {
  std::vector<std::string> names, arguments;
  int early_argument_pieces = 0;
};

Streamed stream_in_pieces(const ToolSyntax& syntax, const std::string& reply, size_t piece) {
  ToolCallExtractor x(&syntax);
  Streamed out;
  auto take = [&](bool early) {
    for (const ToolCallExtractor::Piece& p : x.pieces()) {
      if (p.first) {
        EXPECT_EQ(p.index, out.names.size());
        out.names.push_back(p.name);
        out.arguments.emplace_back();
      }
      out.arguments.at(p.index) += p.arguments;
      if (early && !p.arguments.empty()) ++out.early_argument_pieces;
    }
  };
  for (size_t i = 0; i < reply.size(); i += piece) {
    x.feed(reply.substr(i, piece));
    take(i + piece < reply.size());
  }
  take(false);
  return out;
}

TEST(ToolSyntax, CallsStreamTheirArgumentsAsTheyAreWritten) {
  struct Case {
    const ToolSyntax* syntax;
    std::string reply;
  };
  const std::vector<Case> cases = {
      {&hermes(), "Checking.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Pa\\\"ris}\", "
                  "\"n\": [1, {\"a\": 2}]}}\n</tool_call>\n<tool_call>\n{\"name\": \"ping\", \"arguments\": {}}\n</tool_call>"},
      {&llama3(), "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"}{\", \"n\": [1, {\"a\": 2}]}}; "
                  "{\"name\": \"ping\", \"parameters\": {}}"},
      {&mistral(), "[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"]\", \"n\": [1, {\"a\": 2}]}}, "
                   "{\"name\": \"ping\", \"arguments\": {}}]"},
  };
  for (const Case& c : cases) {
    const auto final_calls = read_in_pieces(c.syntax, c.reply, 1000).final.calls;
    ASSERT_EQ(final_calls.size(), 2u) << c.syntax->name;
    for (size_t piece : {1, 4, 1000}) {
      const Streamed s = stream_in_pieces(*c.syntax, c.reply, piece);
      ASSERT_EQ(s.names, std::vector<std::string>({"get_weather", "ping"})) << c.syntax->name << " " << piece;
      for (size_t k = 0; k < 2; ++k)
        EXPECT_EQ(nlohmann::json::parse(s.arguments[k]), nlohmann::json::parse(final_calls[k].arguments))
            << c.syntax->name << " " << piece << " " << s.arguments[k];
      if (piece == 1) {
        EXPECT_GT(s.early_argument_pieces, 10) << c.syntax->name;
      }
    }
  }
}

TEST(ToolSyntax, ArgumentsGivenAsAStringAreNotStreamed) {
  const std::string reply = "<tool_call>\n{\"name\": \"f\", \"arguments\": \"{\\\"a\\\": 1}\"}\n</tool_call>";
  ToolCallExtractor x(&hermes());
  x.feed(reply);
  const auto pieces = x.pieces();
  ASSERT_EQ(pieces.size(), 1u);
  EXPECT_TRUE(pieces[0].first);
  EXPECT_EQ(pieces[0].arguments, "");
  EXPECT_FALSE(x.arguments_streamed(0));
  EXPECT_EQ(x.finish().calls.at(0).arguments, "{\"a\":1}");
}

TEST(ToolSyntax, WithoutASyntaxEverythingIsContent) {
  Read r = read_in_pieces(nullptr, "<tool_call>{\"name\": \"f\"}</tool_call>", 3);
  EXPECT_EQ(r.streamed, "<tool_call>{\"name\": \"f\"}</tool_call>");
  EXPECT_TRUE(r.final.calls.empty());
}

TEST(ToolSyntax, StructuralTagFollowsToolChoice) {
  const std::vector<ToolDef> tools = {{"get_weather", R"({"type":"object","properties":{"city":{"type":"string"}}})"},
                                      {"noop", ""}};
  auto required = tool_call_structural_tag(hermes(), tools, ToolChoice::kRequired, "", /*parallel=*/false);
  ASSERT_TRUE(required) << required.status().message();
  const auto tag = nlohmann::json::parse(*required);
  EXPECT_EQ(tag["type"], "structural_tag");
  EXPECT_EQ(tag["format"]["type"], "tags_with_separator");
  EXPECT_EQ(tag["format"]["at_least_one"], true);
  EXPECT_EQ(tag["format"]["stop_after_first"], true);
  ASSERT_EQ(tag["format"]["tags"].size(), 2u);
  EXPECT_EQ(tag["format"]["tags"][0]["begin"], "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": ");
  // No parameters: the arguments are {} (OpenAI's empty parameter list).
  EXPECT_EQ(tag["format"]["tags"][1]["content"]["json_schema"],
            nlohmann::json::parse(R"({"type": "object", "properties": {}, "additionalProperties": false})"));

  auto named = tool_call_structural_tag(hermes(), tools, ToolChoice::kNamed, "noop", true);
  ASSERT_TRUE(named);
  EXPECT_EQ(nlohmann::json::parse(*named)["format"]["tags"].size(), 1u);
  EXPECT_FALSE(tool_call_structural_tag(hermes(), tools, ToolChoice::kNamed, "missing", true));

  auto none = tool_call_structural_tag(hermes(), tools, ToolChoice::kNone, "", true);
  ASSERT_TRUE(none);
  EXPECT_EQ(nlohmann::json::parse(*none)["format"]["excludes"], nlohmann::json::array({"<tool_call>"}));
  auto automatic = tool_call_structural_tag(hermes(), tools, ToolChoice::kAuto, "", true);
  ASSERT_TRUE(automatic);
  EXPECT_EQ(nlohmann::json::parse(*automatic)["format"]["type"], "triggered_tags");
  // A syntax whose opener is ordinary text cannot be left open to text: no constraint.
  auto llama_auto = tool_call_structural_tag(llama3(), tools, ToolChoice::kAuto, "", true);
  ASSERT_TRUE(llama_auto);
  EXPECT_EQ(*llama_auto, "");
}

TEST(ToolSyntax, AnUnsupportedParameterKeywordNamesTheTool) {
  const std::vector<ToolDef> tools = {{"ok", ""}, {"bad", R"({"type":"object","not":{"type":"string"}})"}};
  auto tag = tool_call_structural_tag(hermes(), tools, ToolChoice::kRequired, "", true);
  ASSERT_FALSE(tag);
  EXPECT_NE(tag.status().message().find("tools[1].function.parameters"), std::string::npos) << tag.status().message();
  EXPECT_NE(tag.status().message().find("not"), std::string::npos);
}

}  // namespace
}  // namespace pagoda

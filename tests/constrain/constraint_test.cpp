#include "constrain/constraint.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <random>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "tokenizer/test_vocabs.h"

namespace pagoda {
namespace {

// Byte tokens plus multi-byte pieces that straddle JSON's structure, so a constraint has
// to reason about tokens that are only partly allowed.
std::unique_ptr<Tokenizer> json_tokenizer() {
  std::vector<std::pair<std::string, float>> normal;
  for (const char* p : {"{\"", "\":", "\",", "\"}", "true", "false", "null", "12", "3.", "e+", "▁the", "▁cat", "ab",
                        "\"a", "], ", "[1", "yes", "no", "may", "be", "\\n", "\\u00"})
    normal.emplace_back(p, -1.0f);
  return test::make(test::spm_vocab(normal));
}

ConstraintSpec spec(ConstraintKind kind, std::string text, std::vector<std::string> choices = {}) {
  ConstraintSpec s;
  s.kind = kind;
  s.text = std::move(text);
  s.choices = std::move(choices);
  return s;
}

struct Walk {
  std::string text;
  bool terminated = false;
  int tokens = 0;
};

// Draws tokens from random logits under the constraint until it terminates: any text it
// produces is the constraint's doing, not a model's.
Walk walk(const Tokenizer& tok, ConstraintMatcher& m, uint32_t seed, int width, int max_tokens = 4000) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  Walk w;
  std::vector<float> logits(static_cast<size_t>(width));
  for (; w.tokens < max_tokens && !m.terminated(); ++w.tokens) {
    for (float& x : logits) x = normal(rng);
    m.mask(logits);
    int best = -1;
    for (int i = 0; i < width; ++i)
      if (std::isfinite(logits[i]) && (best < 0 || logits[i] > logits[best])) best = i;
    EXPECT_GE(best, 0) << "nothing allowed after " << w.text;
    if (best < 0) break;
    EXPECT_TRUE(m.accept(best));
    if (!tok.is_eog(best)) w.text += tok.token_to_bytes(best);
  }
  w.terminated = m.terminated();
  return w;
}

// The parse error (with its byte offset) when `text` is not JSON, else empty.
std::string json_error(const std::string& text) {
  try {
    auto parsed = nlohmann::json::parse(text);
    (void)parsed;
    return {};
  } catch (const nlohmann::json::out_of_range&) {
    return {};  // 1e+312: valid JSON that a double cannot hold (Python reads it as inf)
  } catch (const std::exception& e) {
    return e.what();
  }
}

// maxLength counts characters, not bytes.
size_t code_points(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

class Constrained : public ::testing::Test {
 protected:
  void SetUp() override {
    tok_ = json_tokenizer();
    width_ = tok_->vocab_size() + 7;  // a padded output matrix, as real models have
    auto c = ConstraintCompiler::create(*tok_, width_, 2);
    ASSERT_TRUE(c.is_ok()) << c.status().message();
    compiler_ = std::move(c).value();
  }
  std::shared_ptr<const Constraint> compile(ConstraintSpec spec) {
    auto c = compiler_->compile(spec);
    EXPECT_TRUE(c.is_ok()) << c.status().message();
    return c.is_ok() ? c.value() : nullptr;
  }
  std::unique_ptr<Tokenizer> tok_;
  int width_ = 0;
  std::unique_ptr<ConstraintCompiler> compiler_;
};

TEST_F(Constrained, RandomLogitsUnderAChoiceGiveExactlyOneChoice) {
  auto c = compile(spec(ConstraintKind::kChoice, "", {"yes", "no", "maybe \"so\""}));
  ASSERT_TRUE(c);
  std::set<std::string> seen;
  for (uint32_t seed = 0; seed < 30; ++seed) {
    ConstraintMatcher m(c);
    Walk w = walk(*tok_, m, seed, width_);
    EXPECT_TRUE(w.terminated);
    EXPECT_TRUE(w.text == "yes" || w.text == "no" || w.text == "maybe \"so\"") << w.text;
    seen.insert(w.text);
  }
  EXPECT_EQ(seen.size(), 3u);
}

TEST_F(Constrained, RandomLogitsUnderASchemaGiveValidJson) {
  const char* schema = R"({"type": "object", "properties": {
      "name": {"type": "string", "maxLength": 12},
      "age": {"type": "integer", "minimum": 0, "maximum": 150},
      "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "minItems": 1, "maxItems": 3},
      "ok": {"type": "boolean"}},
    "required": ["name", "age", "tags", "ok"], "additionalProperties": false})";
  auto c = compile(spec(ConstraintKind::kJsonSchema, schema));
  ASSERT_TRUE(c);
  for (uint32_t seed = 0; seed < 20; ++seed) {
    ConstraintMatcher m(c);
    Walk w = walk(*tok_, m, seed, width_);
    ASSERT_TRUE(w.terminated) << w.text;
    ASSERT_EQ(json_error(w.text), "") << w.text;
    auto j = nlohmann::json::parse(w.text);
    ASSERT_TRUE(j.is_object()) << w.text;
    EXPECT_EQ(j.size(), 4u) << w.text;
    EXPECT_TRUE(j["name"].is_string() && code_points(j["name"].get<std::string>()) <= 12) << w.text;
    EXPECT_TRUE(j["age"].is_number_integer() && j["age"].get<int>() >= 0 && j["age"].get<int>() <= 150) << w.text;
    ASSERT_TRUE(j["tags"].is_array()) << w.text;
    EXPECT_GE(j["tags"].size(), 1u);
    EXPECT_LE(j["tags"].size(), 3u);
    for (const auto& t : j["tags"]) EXPECT_TRUE(t == "a" || t == "b") << w.text;
    EXPECT_TRUE(j["ok"].is_boolean()) << w.text;
  }
}

TEST_F(Constrained, JsonObjectModeGivesAnObject) {
  auto c = compile(spec(ConstraintKind::kJsonObject, ""));
  ASSERT_TRUE(c);
  int finished = 0;
  for (uint32_t seed = 0; seed < 10; ++seed) {
    ConstraintMatcher m(c);
    Walk w = walk(*tok_, m, seed, width_, 400);
    // Random logits may nest without end; what ends must be an object.
    if (!w.terminated) continue;
    ++finished;
    ASSERT_EQ(json_error(w.text), "") << w.text;
    EXPECT_EQ(w.text[w.text.find_first_not_of(" \t\r\n")], '{') << w.text;
  }
  EXPECT_GT(finished, 0);
}

TEST_F(Constrained, RegexAndGrammarAreFollowed) {
  // Ten random walks under `c`, each ending in a text `expected` matches.
  auto walks_match = [&](const std::shared_ptr<const Constraint>& c, const std::string& expected) {
    ASSERT_TRUE(c);
    for (uint32_t seed = 0; seed < 10; ++seed) {
      ConstraintMatcher m(c);
      Walk w = walk(*tok_, m, seed, width_);
      EXPECT_TRUE(w.terminated);
      EXPECT_TRUE(std::regex_match(w.text, std::regex(expected))) << w.text;
    }
  };
  walks_match(compile(spec(ConstraintKind::kRegex, "[a-c]{2,5}-[0-9]+\\.(yes|no)")), "[a-c]{2,5}-[0-9]+\\.(yes|no)");
  // llama.cpp's GBNF syntax.
  walks_match(compile(spec(ConstraintKind::kGrammar, "root ::= \"[\" item (\", \" item)* \"]\"\nitem ::= [0-9] | \"true\"\n")),
              "\\[([0-9]|true)(, ([0-9]|true))*\\]");
  // A JSON-schema pattern with an optional group around a bounded repetition (xgrammar
  // once let "49Z" through here: scripts/patches/xgrammar-0.2.9-optional-group-ends.patch).
  auto c = compile(spec(ConstraintKind::kJsonSchema, R"({"type": "string", "pattern": "^(x[0-9]{1,3})?Z$"})"));
  ASSERT_TRUE(c);
  for (uint32_t seed = 0; seed < 20; ++seed) {
    ConstraintMatcher m(c);
    Walk w = walk(*tok_, m, seed, width_);
    ASSERT_TRUE(w.terminated) << w.text;
    const std::string value = nlohmann::json::parse(w.text).get<std::string>();
    EXPECT_TRUE(std::regex_match(value, std::regex("(x[0-9]{1,3})?Z"))) << value;
  }
}

TEST_F(Constrained, PaddedIdsAndControlTokensAreNeverAllowed) {
  auto c = compile(spec(ConstraintKind::kRegex, ".*"));
  ASSERT_TRUE(c);
  ConstraintMatcher m(c);
  std::vector<float> logits(static_cast<size_t>(width_) + 3, 1.0f);
  m.mask(logits);
  for (size_t i = tok_->vocab_size(); i < logits.size(); ++i) EXPECT_TRUE(std::isinf(logits[i])) << i;
  EXPECT_TRUE(std::isinf(logits[1])) << "<s> is a control token";
  EXPECT_TRUE(std::isfinite(logits[2])) << "</s> ends the text";
  EXPECT_FALSE(m.accept(1));
  EXPECT_FALSE(m.accept(width_ + 1));
}

TEST_F(Constrained, AForkContinuesIndependently) {
  auto c = compile(spec(ConstraintKind::kChoice, "", {"ab", "abab"}));
  ASSERT_TRUE(c);
  ConstraintMatcher m(c);
  const int ab = test::id_of(tok_->vocab(), "ab");
  ASSERT_TRUE(m.accept(ab));
  auto f = m.fork();
  ASSERT_TRUE(f->accept(ab));
  EXPECT_TRUE(f->accept(2));
  EXPECT_TRUE(f->terminated());
  EXPECT_FALSE(m.terminated());
  EXPECT_TRUE(m.accept(2));  // "ab" then end, in the original
  EXPECT_TRUE(m.terminated());
}

TEST_F(Constrained, ForcedTokensAreTheTokenizersEncodingLessTheLast) {
  auto c = compile(spec(ConstraintKind::kChoice, "", {"truefalsenull"}));
  ASSERT_TRUE(c);
  ConstraintMatcher m(c);
  // Encoded as a continuation: no SentencePiece dummy prefix before "true".
  const std::vector<int32_t> forced = m.forced_tokens(*tok_);
  std::vector<int32_t> expected = tok_->encode_continuation("truefalsenull");
  ASSERT_GE(expected.size(), 2u);
  EXPECT_NE(tok_->encode("truefalsenull", false, true), tok_->encode_continuation("truefalsenull"));
  expected.pop_back();
  EXPECT_EQ(forced, expected);
  for (int32_t t : forced) ASSERT_TRUE(m.accept(t));
  EXPECT_FALSE(m.terminated());
}

TEST_F(Constrained, AnEncodingThatDoesNotSpellTheForcedTextForcesNothing) {
  // This vocabulary has no "▁": a space is byte-encoded as the three bytes of "▁", which
  // are not the text's space, so appending them would leave the grammar.
  auto c = compile(spec(ConstraintKind::kChoice, "", {"true and more"}));
  ASSERT_TRUE(c);
  ConstraintMatcher m(c);
  EXPECT_TRUE(m.forced_tokens(*tok_).empty());
}

TEST_F(Constrained, NothingIsForcedWhereTheGrammarBranches) {
  auto c = compile(spec(ConstraintKind::kChoice, "", {"yes", "no"}));
  ASSERT_TRUE(c);
  ConstraintMatcher m(c);
  EXPECT_TRUE(m.forced_tokens(*tok_).empty());
}

TEST_F(Constrained, SpecsThatCannotCompileAreErrors) {
  auto bad = [&](ConstraintSpec s) {
    auto r = compiler_->compile(s);
    EXPECT_FALSE(r.is_ok()) << constraint_kind_name(s.kind) << ": " << s.text;
    if (!r.is_ok()) {
      EXPECT_FALSE(r.status().message().empty());
    }
  };
  bad(spec(ConstraintKind::kJsonSchema, "{\"type\": "));
  bad(spec(ConstraintKind::kJsonSchema, "{\"type\": \"no-such-type\"}"));
  bad(spec(ConstraintKind::kRegex, "(unclosed"));
  bad(spec(ConstraintKind::kGrammar, "root ::= missing_rule"));
  bad(spec(ConstraintKind::kGrammar, "this is not a grammar"));
  bad(spec(ConstraintKind::kChoice, "", {}));
  bad(spec(ConstraintKind::kChoice, "", {"a", ""}));
}

}  // namespace
}  // namespace pagoda

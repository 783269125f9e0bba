#include "constrain/schema_support.h"

#include <gtest/gtest.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <regex>
#include <string>

namespace pagoda {
namespace {

using json = nlohmann::json;

json prepared(const char* schema) {
  auto r = prepare_json_schema(schema);
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  return r.is_ok() ? json::parse(*r) : json();
}

std::string refusal(const char* schema) {
  auto r = prepare_json_schema(schema);
  EXPECT_FALSE(r.is_ok()) << schema;
  return r.is_ok() ? "" : r.status().message();
}

TEST(SchemaSupport, KeywordsTheGrammarCannotHonourAreRefusedWithTheirPlace) {
  EXPECT_NE(refusal(R"({"not": {"type": "integer"}})").find("'not' (at the top level)"), std::string::npos);
  EXPECT_NE(refusal(R"({"type": "object", "properties": {"a": {"if": {}, "then": {}}}})").find("/properties/a"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"type": "array", "uniqueItems": true})").find("uniqueItems"), std::string::npos);
  EXPECT_NE(refusal(R"({"$ref": "http://example.com/s.json"})").find("only references within"), std::string::npos);
  EXPECT_NE(refusal(R"({"allOf": [{"pattern": "a"}, {"pattern": "b"}]})").find("two different 'pattern'"),
            std::string::npos);
  EXPECT_NE(refusal("{not json").find("not valid JSON"), std::string::npos);
  EXPECT_TRUE(prepare_json_schema(R"({"type": "array", "uniqueItems": false})").is_ok());
}

TEST(SchemaSupport, TypeSpecificKeywordsImplyTheirType) {
  EXPECT_EQ(prepared(R"({"maximum": 3})")["type"], "number");
  EXPECT_EQ(prepared(R"({"properties": {"a": {"minLength": 2}}})")["properties"]["a"]["type"], "string");
  EXPECT_EQ(prepared(R"({"minItems": 1, "maxLength": 4})")["type"], json::array({"string", "array"}));
  EXPECT_FALSE(prepared(R"({"enum": [1, "a"], "maximum": 3})").contains("type"));
}

TEST(SchemaSupport, OlderDraftFormsAreRewritten) {
  json t = prepared(R"({"type": "array", "items": [{"type": "integer"}], "additionalItems": {"type": "string"}})");
  EXPECT_EQ(t["prefixItems"][0]["type"], "integer");
  EXPECT_EQ(t["items"]["type"], "string");
  EXPECT_FALSE(t.contains("additionalItems"));
  json e = prepared(R"({"type": "number", "maximum": 3, "exclusiveMaximum": true, "minimum": 1, "exclusiveMinimum": false})");
  EXPECT_EQ(e["exclusiveMaximum"], 3);
  EXPECT_FALSE(e.contains("maximum"));
  EXPECT_EQ(e["minimum"], 1);
  EXPECT_FALSE(e.contains("exclusiveMinimum"));
}

TEST(SchemaSupport, PropertiesKeepTheirOrder) {
  // xgrammar generates properties in schema order; users expect "name" before "age".
  auto r = prepare_json_schema(R"({"type": "object", "properties": {"name": {}, "age": {}, "b": {}, "a": {}}})");
  ASSERT_TRUE(r.is_ok());
  EXPECT_LT(r->find("\"name\""), r->find("\"age\""));
  EXPECT_LT(r->find("\"b\""), r->find("\"a\""));
}

// xgrammar reads one of $ref / const / enum / anyOf / oneOf / allOf and drops what is
// beside it, and takes allOf for "any value": the schema is rewritten so that nothing is
// dropped, or refused.
TEST(SchemaSupport, AllOfIsMergedIntoOneSchema) {
  json m = prepared(R"({"properties": {"bar": {"type": "integer"}}, "required": ["bar"],
                        "allOf": [{"properties": {"foo": {"type": "string"}}, "required": ["foo"]},
                                  {"properties": {"bar": {"minimum": 2}}, "required": ["baz"]}]})");
  EXPECT_FALSE(m.contains("allOf"));
  EXPECT_EQ(m["type"], "object");
  EXPECT_EQ(m["required"], json::parse(R"(["bar", "foo", "baz"])"));
  EXPECT_EQ(m["properties"]["bar"], json::parse(R"({"type": "integer", "minimum": 2})"));
  EXPECT_EQ(m["properties"]["foo"]["type"], "string");
  json bounds = prepared(R"({"allOf": [{"type": "number", "maximum": 30}, {"type": "integer", "maximum": 20, "minimum": 3}]})");
  EXPECT_EQ(bounds, json::parse(R"({"type": "integer", "maximum": 20, "minimum": 3})"));
  // Local $refs inside allOf resolve; additionalProperties: false keeps only its properties.
  json ref = prepared(R"({"$defs": {"a": {"type": "object", "properties": {"x": {"type": "integer"}}}},
                          "allOf": [{"$ref": "#/$defs/a"}, {"properties": {"y": {}}, "additionalProperties": false}]})");
  EXPECT_EQ(ref["additionalProperties"], false);
  EXPECT_TRUE(ref["properties"].contains("y"));
  EXPECT_FALSE(ref["properties"].contains("x"));
  EXPECT_NE(refusal(R"({"allOf": [{"type": "string"}, {"type": "integer"}]})").find("cannot be satisfied"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"allOf": [{"properties": {"a": {}}, "additionalProperties": false}, {"required": ["b"]}]})")
                .find("'b' is required but not allowed"),
            std::string::npos);
}

TEST(SchemaSupport, KeywordsBesideAUnionGoIntoEachBranch) {
  json u = prepared(R"({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
                        "anyOf": [{"required": ["a"]}, {"required": ["b"]}]})");
  ASSERT_EQ(u["anyOf"].size(), 2u);
  EXPECT_FALSE(u.contains("properties"));
  EXPECT_EQ(u["anyOf"][1]["required"], json::array({"b"}));
  EXPECT_EQ(u["anyOf"][1]["properties"]["a"]["type"], "integer");
  // A branch the rest contradicts is dropped; none left is unsatisfiable.
  json t = prepared(R"({"type": "string", "anyOf": [{"maxLength": 3}, {"type": "integer"}]})");
  ASSERT_EQ(t["anyOf"].size(), 1u);
  EXPECT_EQ(t["anyOf"][0]["maxLength"], 3);
  EXPECT_NE(refusal(R"({"$ref": "#/$defs/a", "maxItems": 3, "$defs": {"a": {}}})").find("beside it"),
            std::string::npos);
  EXPECT_TRUE(prepare_json_schema(R"({"$ref": "#/$defs/a", "description": "fine", "$defs": {"a": {}}})").is_ok());
}

TEST(SchemaSupport, OneOfMustHaveBranchesThatCannotOverlap) {
  EXPECT_NE(refusal(R"({"oneOf": [{"type": "integer"}, {"minimum": 2}]})").find("may both match"), std::string::npos);
  EXPECT_TRUE(prepare_json_schema(R"({"oneOf": [{"type": "integer"}, {"type": "string"}]})").is_ok());
  EXPECT_TRUE(prepare_json_schema(R"({"oneOf": [{"const": 1}, {"enum": [2, 3]}]})").is_ok());
  // A discriminated union (pydantic's): a required property with distinct consts.
  EXPECT_TRUE(prepare_json_schema(R"({"oneOf": [
      {"type": "object", "properties": {"kind": {"const": "a"}}, "required": ["kind"]},
      {"type": "object", "properties": {"kind": {"const": "b"}, "w": {"type": "integer"}}, "required": ["kind"]}]})")
                  .is_ok());
  EXPECT_NE(refusal(R"({"oneOf": [{"type": "number"}, {"type": "integer"}]})").find("may both match"),
            std::string::npos);
}

TEST(SchemaSupport, EnumValuesAreFilteredByTheKeywordsBesideThem) {
  EXPECT_EQ(prepared(R"({"enum": [1, "a", 5, 2.5], "type": "integer", "minimum": 2})"),
            json::parse(R"({"enum": [5]})"));
  EXPECT_EQ(prepared(R"({"const": "abc", "maxLength": 5, "description": "d"})"),
            json::parse(R"({"description": "d", "enum": ["abc"]})"));
  EXPECT_NE(refusal(R"({"enum": ["a"], "type": "integer"})").find("cannot be satisfied"), std::string::npos);
  EXPECT_NE(refusal(R"({"enum": ["ab"], "pattern": "^a"})").find("not supported"), std::string::npos);
}

TEST(SchemaSupport, LooseFormatsGetStrictPatterns) {
  auto matches = [](const char* format, const std::string& value) {
    json p = prepared(fmt::format(R"({{"type": "string", "format": "{}"}})", format).c_str());
    EXPECT_FALSE(p.contains("format"));
    return std::regex_search(value, std::regex(p["pattern"].get<std::string>()));
  };
  EXPECT_TRUE(matches("ipv4", "192.168.0.255"));
  EXPECT_FALSE(matches("ipv4", "55.026.222.188"));  // a leading zero reads as octal
  EXPECT_FALSE(matches("ipv4", "256.1.1.1"));
  EXPECT_TRUE(matches("date", "2024-12-31"));
  EXPECT_FALSE(matches("date", "2023-02-31"));
  EXPECT_FALSE(matches("date", "0000-01-01"));
  EXPECT_TRUE(matches("date-time", "2024-04-30T23:59:59.5+02:00"));
  EXPECT_FALSE(matches("date-time", "2024-04-31T00:00:00Z"));
  EXPECT_NE(refusal(R"({"type": "string", "format": "date", "pattern": "^2"})").find("pattern"), std::string::npos);
  EXPECT_EQ(prepared(R"({"type": "string", "format": "email"})")["format"], "email");
}

TEST(SchemaSupport, MultipleOfMustBeWhole) {
  EXPECT_EQ(prepared(R"({"type": "number", "multipleOf": 2})")["type"], "integer");
  EXPECT_EQ(prepared(R"({"multipleOf": 5})")["type"], "integer");
  EXPECT_NE(refusal(R"({"type": "number", "multipleOf": 0.5})").find("whole number"), std::string::npos);
}

}  // namespace
}  // namespace pagoda

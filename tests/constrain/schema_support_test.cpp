#include "constrain/schema_support.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

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
  EXPECT_NE(refusal(R"({"allOf": [{"maximum": 3}, {"minimum": 1}]})").find("allOf"), std::string::npos);
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

}  // namespace
}  // namespace pagoda

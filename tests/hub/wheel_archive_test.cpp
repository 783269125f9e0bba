#include "hub/wheel_archive.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "wheel_fixture.h"

namespace pagoda {
namespace {

std::string read_all(const WheelArchive& w, const std::string& member, Status* st) {
  std::string out;
  *st = w.read_member(member, [&](const char* d, size_t n) {
    out.append(d, n);
    return Status::ok();
  });
  return out;
}

class WheelArchiveTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = testing::temp_dir("wheel"); }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(WheelArchiveTest, StreamsAMemberWhole) {
  std::string big;
  for (uint32_t i = 0; i < (3u << 20); ++i) big.push_back(static_cast<char>((i * 7919u) >> 3));
  const std::string path = dir_ + "/a.whl";
  ASSERT_TRUE(testing::write_wheel(path, {{"pkg/__init__.py", ""}, {"pkg/data/part01.bin", big}}));
  auto w = WheelArchive::open(path);
  ASSERT_TRUE(w) << w.status().message();
  auto size = w->member_size("pkg/data/part01.bin");
  ASSERT_TRUE(size);
  EXPECT_EQ(*size, big.size());
  Status st;
  EXPECT_EQ(read_all(*w, "pkg/data/part01.bin", &st), big);
  EXPECT_TRUE(st) << st.message();
  EXPECT_EQ(w->member_names().size(), 2u);
}

TEST_F(WheelArchiveTest, MissingMemberIsAnErrorNamingIt) {
  const std::string path = dir_ + "/a.whl";
  ASSERT_TRUE(testing::write_wheel(path, {{"pkg/x", "1"}}));
  auto w = WheelArchive::open(path);
  ASSERT_TRUE(w);
  auto size = w->member_size("pkg/y");
  ASSERT_FALSE(size);
  EXPECT_NE(size.status().message().find("pkg/y"), std::string::npos);
}

TEST_F(WheelArchiveTest, TruncatedDownloadDoesNotOpen) {
  const std::string path = dir_ + "/a.whl";
  ASSERT_TRUE(testing::write_wheel(path, {{"pkg/x", std::string(100000, 'q')}}, /*compress=*/false));
  std::filesystem::resize_file(path, std::filesystem::file_size(path) / 2);
  auto w = WheelArchive::open(path);
  ASSERT_FALSE(w);
  EXPECT_NE(w.status().message().find("not a readable wheel"), std::string::npos);
}

TEST_F(WheelArchiveTest, FlippedByteFailsTheCrc) {
  const std::string path = dir_ + "/a.whl";
  const std::string data(100000, 'q');
  ASSERT_TRUE(testing::write_wheel(path, {{"pkg/x", data}}, /*compress=*/false));
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(50000);
    f.put('Z');
  }
  auto w = WheelArchive::open(path);
  ASSERT_TRUE(w) << w.status().message();
  Status st;
  read_all(*w, "pkg/x", &st);
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("damaged"), std::string::npos) << st.message();
}

TEST_F(WheelArchiveTest, NotAZipIsAClearError) {
  const std::string path = dir_ + "/a.whl";
  std::ofstream(path) << "<html>404</html>";
  auto w = WheelArchive::open(path);
  ASSERT_FALSE(w);
  EXPECT_NE(w.status().message().find(path), std::string::npos);
}

}  // namespace
}  // namespace pagoda

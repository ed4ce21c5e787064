// \file disk_cache_test.cpp
// The disk cache's trust rules: which directories check_dir accepts, which entries load_entry
// returns (regular files of ours that others cannot write, matching their meta file), and that
// anything else at an entry's paths is removed so that the caller rebuilds it.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "support/DiskCache.h"

namespace kintsugi {
namespace {

namespace fs = std::filesystem;
constexpr std::string_view kFormat = "test-cache 1";

class DiskCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("kintsugi-disk-cache-test-" + std::to_string(getpid()) +
                                         "-" + std::to_string(std::random_device{}()));
    ASSERT_EQ(disk_cache::check_dir(root_, true), "");
    payload_ = root_ / "k.bin";
    meta_ = root_ / "k.meta";
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  void store() { ASSERT_TRUE(disk_cache::store_entry(payload_, meta_, kFormat, "k", "payload")); }
  std::optional<std::string> load() {
    return disk_cache::load_entry(payload_, meta_, kFormat, "k");
  }
  fs::path root_, payload_, meta_;
};

TEST_F(DiskCacheTest, CreatesThePrivateDirectory) {
  struct stat st{};
  ASSERT_EQ(stat(root_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_EQ(st.st_uid, geteuid());
}

TEST_F(DiskCacheTest, StoredEntryLoads) {
  store();
  EXPECT_EQ(load(), "payload");
  struct stat st{};
  ASSERT_EQ(stat(payload_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 022, 0u);
}

TEST_F(DiskCacheTest, BadMetaIsRemoved) {
  store();
  std::ofstream(meta_) << "garbage";
  EXPECT_EQ(load(), std::nullopt);
  EXPECT_FALSE(fs::exists(meta_));
  EXPECT_FALSE(fs::exists(payload_));
}

TEST_F(DiskCacheTest, DirectoryAtThePayloadIsRemoved) {
  store();
  fs::remove(payload_);
  fs::create_directories(payload_ / "inside");
  EXPECT_EQ(load(), std::nullopt);
  EXPECT_FALSE(fs::exists(payload_));
  store();
  EXPECT_EQ(load(), "payload");
}

TEST_F(DiskCacheTest, SymbolicLinkIsNotFollowedAndRemoved) {
  store();
  fs::path target = root_ / "elsewhere.bin";
  fs::rename(payload_, target);
  fs::create_symlink(target, payload_);
  EXPECT_EQ(load(), std::nullopt);
  EXPECT_FALSE(fs::exists(fs::symlink_status(payload_)));
  EXPECT_TRUE(fs::exists(target));  // the link's target is left alone
}

TEST_F(DiskCacheTest, GroupWritableEntryIsNotTrusted) {
  store();
  ASSERT_EQ(chmod(payload_.c_str(), 0664), 0);
  EXPECT_EQ(load(), std::nullopt);
}

TEST_F(DiskCacheTest, ForeignEntryIsNotTrusted) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give a file to another user";
  store();
  ASSERT_EQ(chown(payload_.c_str(), 65534, 65534), 0);
  EXPECT_EQ(load(), std::nullopt);
  EXPECT_FALSE(fs::exists(payload_));
}

TEST_F(DiskCacheTest, WriteAtomicReplacesALinkWithoutFollowingIt) {
  fs::path target = root_ / "precious";
  std::ofstream(target) << "precious";
  fs::create_symlink(target, payload_);
  ASSERT_TRUE(disk_cache::write_atomic(payload_, "new"));
  EXPECT_FALSE(fs::is_symlink(payload_));
  std::string text;
  ASSERT_TRUE(disk_cache::read_file(target, &text));
  EXPECT_EQ(text, "precious");
}

TEST_F(DiskCacheTest, CheckDirRefusesUnsafeDirectories) {
  fs::path open_dir = root_ / "open";
  fs::create_directory(open_dir);
  ASSERT_EQ(chmod(open_dir.c_str(), 0777), 0);
  EXPECT_NE(disk_cache::check_dir(open_dir, true).find("writable by its group or by others"),
            std::string::npos);
  fs::path link = root_ / "link";
  fs::path mine = root_ / "mine";
  fs::create_directory(mine);
  fs::create_directory_symlink(mine, link);
  EXPECT_EQ(disk_cache::check_dir(link, true), "");
  EXPECT_EQ(disk_cache::check_dir(link, false), "it is a symbolic link");
  std::ofstream(root_ / "file") << "x";
  EXPECT_NE(disk_cache::check_dir(root_ / "file", true), "");
  if (geteuid() == 0) {
    fs::path foreign = root_ / "foreign";
    fs::create_directory(foreign);
    ASSERT_EQ(chown(foreign.c_str(), 65534, 65534), 0);
    EXPECT_NE(disk_cache::check_dir(foreign, true).find("owned by another user"),
              std::string::npos);
  }
}

}  // namespace
}  // namespace kintsugi

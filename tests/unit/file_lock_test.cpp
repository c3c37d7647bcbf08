// common/file_lock: a directory's own lock excludes a second holder (flock is per
// open file, so even one in this process), leaves no file in the directory, and a
// directory that is not there is a Storage error naming it.
#include "common/file_lock.hpp"

#include <gtest/gtest.h>

#include <string>

#include "common/error.hpp"
#include "common/io.hpp"
#include "image/test_support.hpp"

namespace boxlite {
namespace {

using image::testing::ScratchDir;

TEST(FileLockTest, ADirectorysLockExcludesASecondHolderAndMakesNoFile) {
  ScratchDir scratch;
  std::string dir = scratch.path() + "/box";
  make_dirs(dir);
  FileLock first = FileLock::try_acquire_directory(dir);
  ASSERT_TRUE(first.held());
  EXPECT_FALSE(FileLock::try_acquire_directory(dir).held()) << "a second exclusive holder";
  EXPECT_FALSE(FileLock::try_acquire_directory(dir, FileLock::Mode::Shared).held()) << "a shared one beside it";
  EXPECT_FALSE(path_exists(dir + "/.lock")) << "a local directory is locked itself";
  first.release();
  FileLock again = FileLock::try_acquire_directory(dir);
  EXPECT_TRUE(again.held()) << "free once released";
  FileLock shared = FileLock::try_acquire_directory(scratch.path(), FileLock::Mode::Shared);
  EXPECT_TRUE(shared.held());
  EXPECT_TRUE(FileLock::try_acquire_directory(scratch.path(), FileLock::Mode::Shared).held()) << "shared with shared";
}

TEST(FileLockTest, AMissingDirectoryIsAStorageErrorNamingIt) {
  ScratchDir scratch;
  std::string dir = scratch.path() + "/gone";
  try {
    (void)FileLock::acquire_directory(dir);
    FAIL() << "locked a directory that is not there";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Storage);
    EXPECT_NE(std::string(e.what()).find(dir), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace boxlite

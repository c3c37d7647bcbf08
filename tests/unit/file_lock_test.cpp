// common/file_lock: a directory's own lock excludes a second holder (flock is per
// open file, so even one in this process), leaves no file in the directory, and a
// directory that is not there is a Storage error naming it.
#include "common/file_lock.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cstdio>
#include <future>
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

// A box directory kept as a spare (core/spare_dirs.hpp) is moved away, and may become
// another box's: whoever waited for its lock meanwhile gets the lock of the directory
// at the path (or the missing directory's error), never the moved one's.
// Whether someone waits for a flock on `path`'s inode (/proc/locks lists waiters as
// "->"), for up to 10 s.
bool someone_waits_for(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return false;
  char dev_ino[64];  // as /proc/locks prints them: "fe:00:1234 "
  std::snprintf(dev_ino, sizeof dev_ino, " %02x:%02x:%lu ", major(st.st_dev), minor(st.st_dev),
                static_cast<unsigned long>(st.st_ino));
  std::string ino = dev_ino;
  for (int i = 0; i < 1000; ++i) {
    for (const auto& line : split(read_file("/proc/locks"), '\n')) {
      if (line.find("->") != std::string::npos && line.find(ino) != std::string::npos) return true;
    }
    ::usleep(10000);
  }
  return false;
}

TEST(FileLockTest, AWaiterGetsTheDirectoryAtThePathNotOneMovedAway) {
  ScratchDir scratch;
  std::string dir = scratch.path() + "/box", moved = scratch.path() + "/spare";
  make_dirs(dir);
  FileLock holder = FileLock::acquire_directory(dir);
  auto waiter = std::async(std::launch::async, [&] { return FileLock::acquire_directory(dir); });
  if (!someone_waits_for(dir)) {
    holder.release();  // else the waiter's future would wait for it forever
    FAIL() << "the waiter never waited for the lock";
  }
  ASSERT_EQ(::rename(dir.c_str(), moved.c_str()), 0);
  make_dirs(dir);  // another box's, at the same path
  holder.release();
  FileLock got = waiter.get();
  ASSERT_TRUE(got.held());
  EXPECT_TRUE(FileLock::try_acquire_directory(moved).held()) << "the waiter kept the moved directory's lock";
  EXPECT_FALSE(FileLock::try_acquire_directory(dir).held()) << "the waiter does not hold the directory there now";

  got.release();

  // Moved away with nothing in its place: the error of a directory that is not there.
  FileLock again = FileLock::acquire_directory(dir);
  auto late = std::async(std::launch::async, [&] { return FileLock::acquire_directory(dir); });
  if (!someone_waits_for(dir)) {
    again.release();
    FAIL() << "the second waiter never waited for the lock";
  }
  std::string aside = scratch.path() + "/aside";
  ASSERT_EQ(::rename(dir.c_str(), aside.c_str()), 0);
  again.release();
  try {
    (void)late.get();
    ADD_FAILURE() << "locked a directory moved away";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Storage);
    EXPECT_NE(std::string(e.what()).find(dir), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace boxlite

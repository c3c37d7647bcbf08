// common/file_lock: a directory's own lock excludes a second holder (flock is per
// open file, so even one in this process), leaves no file in the directory, and a
// directory that is not there is a Storage error naming it.
#include "common/file_lock.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <future>
#include <string>

#include "common/error.hpp"
#include "common/io.hpp"
#include "image/test_support.hpp"

namespace boxlite {
namespace {

using image::testing::ScratchDir;

// A directory `box` in `scratch`, as a box's directory is.
std::string box_dir_in(const ScratchDir& scratch) {
  std::string dir = scratch.path() + "/box";
  make_dirs(dir);
  return dir;
}

TEST(FileLockTest, ADirectorysLockExcludesASecondHolderAndMakesNoFile) {
  ScratchDir scratch;
  std::string dir = box_dir_in(scratch);
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
    EXPECT_EQ(e.kind(), ErrorKind::Storage);
    EXPECT_NE(std::string(e.what()).find(dir), std::string::npos) << e.what();
  }
}

// A lock taken on a directory that another process then removed (or that was removed
// while the lock was waited for) says so: the box it stood for is gone.
TEST(FileLockTest, ALockedDirectoryRemovedMeanwhileSaysSo) {
  ScratchDir scratch;
  std::string dir = box_dir_in(scratch);
  FileLock lock = FileLock::acquire_directory(dir);
  ASSERT_TRUE(lock.held());
  EXPECT_FALSE(lock.removed());
  ASSERT_EQ(::rmdir(dir.c_str()), 0);
  EXPECT_TRUE(lock.removed());
  EXPECT_FALSE(FileLock().removed()) << "an unheld lock removed nothing";
}

// Whether a thread of this process waits for a flock on `path`'s inode, for up to
// 10 s (/proc/locks lists waiters as "->", with the pid and "maj:min:inode"; the
// device as printed can differ from stat's on btrfs, so by pid and inode).
bool someone_waits_for(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return false;
  std::string pid = " " + std::to_string(::getpid()) + " ";
  std::string ino = ":" + std::to_string(st.st_ino) + " ";
  for (int i = 0; i < 1000; ++i) {
    for (const auto& line : split(read_file("/proc/locks"), '\n')) {
      bool waiter = line.find("->") != std::string::npos;
      if (waiter && line.find(pid) != std::string::npos && line.find(ino) != std::string::npos) return true;
    }
    ::usleep(10000);
  }
  return false;
}

// A box directory kept as a spare (core/spare_dirs.hpp) is moved away, and may become
// another box's: whoever waited for its lock meanwhile gets the lock of the directory
// at the path (or the missing directory's error), never the moved one's.
TEST(FileLockTest, AWaiterGetsTheDirectoryAtThePathNotOneMovedAway) {
  ScratchDir scratch;
  std::string dir = scratch.path() + "/box", moved = scratch.path() + "/spare";
  make_dirs(dir);
  std::future<FileLock> waiter;  // destroyed after the lock it waits for: never waits forever
  FileLock holder = FileLock::acquire_directory(dir);
  waiter = std::async(std::launch::async, [&] { return FileLock::acquire_directory(dir); });
  if (!someone_waits_for(dir)) {
    holder.release();
    FAIL() << "the waiter never waited for the lock";
  }
  if (::rename(dir.c_str(), moved.c_str()) != 0) {
    holder.release();
    FAIL() << "rename " << dir << ": " << std::strerror(errno);
  }
  make_dirs(dir);  // another box's, at the same path
  holder.release();
  FileLock got = waiter.get();
  ASSERT_TRUE(got.held());
  EXPECT_TRUE(FileLock::try_acquire_directory(moved).held()) << "the waiter kept the moved directory's lock";
  EXPECT_FALSE(FileLock::try_acquire_directory(dir).held()) << "the waiter does not hold the directory there now";
  got.release();

  // Moved away with nothing in its place: the error of a directory that is not there.
  std::future<FileLock> late;
  FileLock again = FileLock::acquire_directory(dir);
  late = std::async(std::launch::async, [&] { return FileLock::acquire_directory(dir); });
  if (!someone_waits_for(dir)) {
    again.release();
    FAIL() << "the second waiter never waited for the lock";
  }
  std::string aside = scratch.path() + "/aside";
  if (::rename(dir.c_str(), aside.c_str()) != 0) {
    again.release();
    FAIL() << "rename " << dir << ": " << std::strerror(errno);
  }
  again.release();
  try {
    (void)late.get();
    ADD_FAILURE() << "locked a directory moved away";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Storage);
    EXPECT_NE(std::string(e.what()).find(dir), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace boxlite

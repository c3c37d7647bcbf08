// common/io: remove_tree removes whole trees (by levels, in parallel) without
// following a symlink out of them, however deep; spread_subdirectories; read_file_if_present;
// send_all.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>

#include "common/error.hpp"
#include "common/io.hpp"
#include "image/test_support.hpp"

namespace boxlite {
namespace {

using image::testing::ScratchDir;

void touch(const std::string& path) { write_file_atomic(path, "x", 0644, /*durable=*/false); }

TEST(RemoveTreeTest, RemovesNestedDirectoriesFilesAndSpecialEntries) {
  ScratchDir scratch;
  std::string root = scratch.path() + "/box";
  for (const char* d : {"", "/upper", "/upper/etc", "/upper/a", "/upper/a/b", "/upper/a/b/c", "/work", "/work/work"}) {
    make_dirs(root + d);
  }
  for (int i = 0; i < 20; ++i) make_dirs(root + "/upper/many/d" + std::to_string(i) + "/inner");
  touch(root + "/upper/etc/hosts");
  touch(root + "/upper/a/b/c/deep");
  ASSERT_EQ(::mkfifo((root + "/upper/fifo").c_str(), 0600), 0);
  ASSERT_EQ(::mknod((root + "/upper/a/whiteout").c_str(), S_IFCHR | 0000, 0), 0);
  ASSERT_EQ(::chmod((root + "/upper/a/b").c_str(), 0), 0);  // root removes it all the same
  remove_tree(root);
  EXPECT_FALSE(path_exists(root));
}

TEST(RemoveTreeTest, NeverFollowsASymlinkOutOfTheTree) {
  ScratchDir scratch;
  std::string outside = scratch.path() + "/outside", root = scratch.path() + "/box";
  make_dirs(outside + "/keep");
  touch(outside + "/keep/file");
  make_dirs(root + "/upper");
  ASSERT_EQ(::symlink(outside.c_str(), (root + "/upper/link-to-dir").c_str()), 0);
  ASSERT_EQ(::symlink((outside + "/keep/file").c_str(), (root + "/upper/link-to-file").c_str()), 0);
  remove_tree(root);
  EXPECT_FALSE(path_exists(root));
  EXPECT_TRUE(path_exists(outside + "/keep/file"));
}

TEST(RemoveTreeTest, AFileOrAMissingPath) {
  ScratchDir scratch;
  std::string file = scratch.path() + "/file";
  touch(file);
  remove_tree(file);
  EXPECT_FALSE(path_exists(file));
  EXPECT_NO_THROW(remove_tree(scratch.path() + "/missing"));
}

// A chain of `depth` directories named "d" below `top`, made by relative names as a
// box can (deeper than PATH_MAX), with a file and a side directory every 500 levels.
void nest_directories(const std::string& top, int depth) {
  UniqueFd dir(::open(top.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  ASSERT_TRUE(dir);
  for (int i = 0; i < depth; ++i) {
    ASSERT_EQ(::mkdirat(dir.get(), "d", 0755), 0) << "level " << i;
    if (i % 500 == 0) {
      ASSERT_EQ(::mkdirat(dir.get(), "side", 0755), 0);
      UniqueFd f(::openat(dir.get(), "side/f", O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
      ASSERT_TRUE(f);
    }
    dir = UniqueFd(::openat(dir.get(), "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    ASSERT_TRUE(dir) << "level " << i;
  }
  UniqueFd f(::openat(dir.get(), "bottom", O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
  ASSERT_TRUE(f);
}

size_t open_descriptors() {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

// A hostile box's upper layer can nest directories far deeper than PATH_MAX and than
// the descriptors the removing process may open: the removal still takes all of it,
// holding a bounded number of descriptors, and leaks none. The random names it moves
// directories to on the way never replace one of the box's.
TEST(RemoveTreeTest, ATreeDeeperThanPathMaxAndTheDescriptorLimitGoesWhole) {
  ScratchDir scratch;
  std::string root = scratch.path() + "/box", upper = root + "/upper";
  make_dirs(upper);
  nest_directories(upper, 3000);
  touch(upper + "/.boxlite-deep-0");  // names like the ones the removal moves directories to
  make_dirs(upper + "/.boxlite-deep-1/made-by-the-box");
  struct rlimit saved {};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &saved), 0);
  size_t before = open_descriptors();
  struct rlimit low = {256, saved.rlim_max};
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
  bool emptied = empty_directory(upper);
  ::setrlimit(RLIMIT_NOFILE, &saved);
  EXPECT_TRUE(emptied);
  EXPECT_TRUE(path_exists(upper)) << "empty_directory keeps the directory itself";
  EXPECT_EQ(std::filesystem::directory_iterator(upper), std::filesystem::directory_iterator());
  EXPECT_EQ(open_descriptors(), before);

  nest_directories(upper, 3000);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
  EXPECT_NO_THROW(remove_tree(root));
  ::setrlimit(RLIMIT_NOFILE, &saved);
  EXPECT_FALSE(path_exists(root));
  EXPECT_EQ(open_descriptors(), before);
}

// A file system mounted below what is removed (the same one bound there, here) is
// never entered: nothing of it is removed, and the removal says why it stopped.
TEST(RemoveTreeTest, NeverRemovesAcrossAMountBelowIt) {
  ScratchDir scratch;
  std::string outside = scratch.path() + "/outside", root = scratch.path() + "/box";
  make_dirs(outside + "/keep");
  touch(outside + "/keep/file");
  make_dirs(root + "/upper/mnt");
  touch(root + "/upper/other");
  if (::mount(outside.c_str(), (root + "/upper/mnt").c_str(), nullptr, MS_BIND, nullptr) != 0) {
    GTEST_SKIP() << "cannot bind-mount here: " << std::strerror(errno);
  }
  struct Unmount {
    std::string at;
    ~Unmount() { ::umount2(at.c_str(), MNT_DETACH); }
  } unmount{root + "/upper/mnt"};
  try {
    remove_tree(root);
    ADD_FAILURE() << "removed a tree with a mount below it";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Storage);
    EXPECT_NE(std::string(e.what()).find("mounted below"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(empty_directory(root + "/upper"));
  EXPECT_TRUE(path_exists(outside + "/keep/file")) << "removed through the mount";
}

// The inode's FS_IOC_GETFLAGS flags; -1 where the file system keeps none.
int inode_flags(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  int flags = -1;
  if (!fd || ::ioctl(fd.get(), FS_IOC_GETFLAGS, &flags) != 0) return -1;
  return flags;
}

TEST(SpreadSubdirectoriesTest, FlagsTheDirectoryOnceAndNeverThroughASymlink) {
  ScratchDir scratch;
  std::string dir = scratch.path() + "/boxes", other = scratch.path() + "/other";
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  ASSERT_EQ(::mkdir(other.c_str(), 0700), 0);
  ASSERT_EQ(::symlink(other.c_str(), (scratch.path() + "/link").c_str()), 0);
  spread_subdirectories(scratch.path() + "/missing");  // a hint: nothing to throw
  spread_subdirectories(scratch.path() + "/link");
  spread_subdirectories(dir);
  spread_subdirectories(dir);
  int flags = inode_flags(dir);
  if (flags < 0 || (flags & FS_TOPDIR_FL) == 0) GTEST_SKIP() << "this file system keeps no FS_TOPDIR_FL";
  EXPECT_EQ(inode_flags(other) & FS_TOPDIR_FL, 0) << "the hint followed a symlink";
}

// A missing file is an answer, not an error; anything else still is one.
TEST(ReadFileIfPresentTest, MissingIsNulloptOtherFailuresThrow) {
  ScratchDir scratch;
  std::string f = scratch.path() + "/f";
  EXPECT_FALSE(read_file_if_present(f).has_value());
  write_file_atomic(f, "hello", 0644, /*durable=*/false);
  EXPECT_EQ(read_file_if_present(f).value_or(""), "hello");
  EXPECT_THROW(read_file_if_present(f + "/under-a-file"), Error);  // ENOTDIR
  make_dirs(scratch.path() + "/d");
  EXPECT_THROW(read_file_if_present(scratch.path() + "/d"), Error);  // EISDIR on read
}

TEST(SendAllTest, APeerThatHasGoneIsAnErrorNotSigpipe) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  UniqueFd ours(sv[0]);
  ::close(sv[1]);
  // With the default SIGPIPE disposition a plain write() here would end the test binary.
  std::string data(4096, 'x');
  EXPECT_THROW(send_all(ours.get(), data.data(), data.size()), Error);
}

// Descriptors passed with a message arrive close-on-exec and refer to the same
// files; a message cut short is refused with nothing left open; EOF is 0.
TEST(PassFdsTest, DescriptorsTravelWithTheirMessage) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
  UniqueFd a(sv[0]), b(sv[1]);
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  UniqueFd pr(p[0]), pw(p[1]);
  int sent[2] = {pr.get(), pw.get()};
  ASSERT_EQ(send_with_fds(a.get(), "hi", 2, sent, 2), 2);
  char buf[8] = {};
  int got[kMaxPassedFds];
  size_t n = 0;
  ASSERT_EQ(recv_with_fds(b.get(), buf, sizeof buf, got, kMaxPassedFds, &n), 2);
  ASSERT_EQ(n, 2u);
  EXPECT_EQ(std::string(buf, 2), "hi");
  UniqueFd r(got[0]), w(got[1]);
  EXPECT_EQ(::fcntl(r.get(), F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
  ASSERT_EQ(::write(w.get(), "x", 1), 1);
  char c = 0;
  ASSERT_EQ(::read(pr.get(), &c, 1), 1);  // the received write end is the pipe's
  EXPECT_EQ(c, 'x');

  // More descriptors than the receiver takes: refused, and none left open.
  ASSERT_EQ(send_with_fds(a.get(), "hi", 2, sent, 2), 2);
  int one[1];
  EXPECT_EQ(recv_with_fds(b.get(), buf, sizeof buf, one, 1, &n), -1);
  EXPECT_EQ(errno, EMSGSIZE);
  EXPECT_EQ(n, 0u);
  // More data than the buffer: refused too.
  ASSERT_EQ(send_with_fds(a.get(), "hello", 5, sent, 1), 5);
  EXPECT_EQ(recv_with_fds(b.get(), buf, 2, got, kMaxPassedFds, &n), -1);
  EXPECT_EQ(errno, EMSGSIZE);
  int too_many[kMaxPassedFds + 1] = {};
  EXPECT_EQ(send_with_fds(a.get(), "x", 1, too_many, kMaxPassedFds + 1), -1);
  EXPECT_EQ(errno, EINVAL);
  a.reset();
  EXPECT_EQ(recv_with_fds(b.get(), buf, sizeof buf, got, kMaxPassedFds, &n), 0);
}

}  // namespace
}  // namespace boxlite

// common/io: remove_tree removes whole trees (by levels, in parallel) without
// following a symlink out of them; read_file_if_present; send_all.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

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

}  // namespace
}  // namespace boxlite

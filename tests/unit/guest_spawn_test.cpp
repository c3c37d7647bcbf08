// guest/lookup.hpp's lookups that decide what a command's execve runs: a relative
// PATH entry or command is taken from the command's working directory (not the
// agent's "/"), and an id the agent's user namespace cannot map is caught before the
// child is started.
#include "guest/lookup.hpp"

#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <string>

#include "common/fd.hpp"
#include "common/io.hpp"
#include "image/test_support.hpp"

namespace boxlite::guest {
namespace {

class FindInPathTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* d : {"/work", "/work/bin", "/other", "/other/bin"})
      ASSERT_EQ(::mkdir((root_ + d).c_str(), 0755), 0);
    make_file("/work/tool", 0755);
    make_file("/work/bin/tool", 0755);
    make_file("/other/bin/plain", 0644);  // not executable: skipped
    ASSERT_EQ(::mkdir((root_ + "/other/bin/dir").c_str(), 0755), 0);
  }
  void make_file(const std::string& rel, mode_t mode) {
    write_file_atomic(root_ + rel, "#!/bin/sh\n", mode, /*durable=*/false);
  }
  image::testing::ScratchDir scratch_;
  std::string root_ = scratch_.path();
};

TEST_F(FindInPathTest, ARelativeEntryIsTakenFromTheWorkingDirectory) {
  std::string work = root_ + "/work";
  EXPECT_EQ(find_in_path("tool", "bin", work), "bin/tool");  // as execvp in `work` names it
  // The same PATH from another directory has no bin/tool there: not the first one's.
  EXPECT_EQ(find_in_path("tool", "bin", root_ + "/other"), "");
}

TEST_F(FindInPathTest, DotAndAnEmptyEntryMeanTheWorkingDirectoryItself) {
  std::string work = root_ + "/work";
  EXPECT_EQ(find_in_path("tool", ".", work), "./tool");
  EXPECT_EQ(find_in_path("tool", "", work), "tool");
  EXPECT_EQ(find_in_path("tool", "bin/", work), "bin/tool");
  EXPECT_EQ(find_in_path("tool", "/nonexistent::bin", work), "tool");
  EXPECT_EQ(find_in_path("tool", ".", root_), "");
}

TEST_F(FindInPathTest, AbsoluteEntriesAreKeptInOrderAndOnlyExecutableFilesMatch) {
  std::string path_var = root_ + "/other/bin:" + root_ + "/work/bin:" + root_ + "/work";
  EXPECT_EQ(find_in_path("tool", path_var, "/"), root_ + "/work/bin/tool");
  EXPECT_EQ(find_in_path("plain", path_var, "/"), "");
  EXPECT_EQ(find_in_path("dir", path_var, "/"), "");
}

TEST_F(FindInPathTest, ARelativeCommandWithASlashIsTakenFromTheWorkingDirectory) {
  std::string work = root_ + "/work";
  EXPECT_EQ(find_in_path("./tool", "/nonexistent", work), "./tool");
  EXPECT_EQ(find_in_path("bin/tool", "", work), "bin/tool");
  EXPECT_EQ(find_in_path("bin/tool", "", root_), "");
  EXPECT_EQ(find_in_path(work + "/tool", "", "/"), work + "/tool");
}

TEST(PathInDirTest, JoinsARelativePathOnceAndKeepsAnAbsoluteOne) {
  EXPECT_EQ(path_in_dir("/etc", "bin/sh"), "/etc/bin/sh");
  EXPECT_EQ(path_in_dir("/", "bin/sh"), "/bin/sh");
  EXPECT_EQ(path_in_dir("/etc/", "./x"), "/etc/./x");
  EXPECT_EQ(path_in_dir("/etc", "/bin/sh"), "/bin/sh");
}

TEST(IdsMappedTest, EveryIdOfTheInitialNamespaceIsMapped) {
  // The host's (and a VM agent's) namespace maps 0..4294967294.
  EXPECT_TRUE(ids_mapped(0, 0));
  EXPECT_TRUE(ids_mapped(70000, static_cast<gid_t>(-1)));
  EXPECT_TRUE(ids_mapped(static_cast<uid_t>(-1), 4000000000u));
}

// A /proc/self map file takes one write(), not a rename over it.
bool write_proc(const std::string& path, const std::string& text) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  return fd && ::write(fd.get(), text.data(), text.size()) == static_cast<ssize_t>(text.size());
}

// As a jail's agent sees it: a user namespace that maps only some ids.
TEST(IdsMappedTest, AnIdOutsideTheUserNamespacesMapIsNot) {
  uid_t uid = ::geteuid();
  gid_t gid = ::getegid();
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // Box id 0 only, the caller's own (what an unprivileged caller may map itself).
    if (::unshare(CLONE_NEWUSER) != 0) ::_exit(100);
    if (!write_proc("/proc/self/uid_map", "0 " + std::to_string(uid) + " 1\n") ||
        !write_proc("/proc/self/setgroups", "deny") ||
        !write_proc("/proc/self/gid_map", "0 " + std::to_string(gid) + " 1\n")) {
      ::_exit(101);
    }
    int bad = 0;
    if (!ids_mapped(0, 0)) bad |= 1;
    if (ids_mapped(1, static_cast<gid_t>(-1))) bad |= 2;
    if (ids_mapped(static_cast<uid_t>(-1), 70000)) bad |= 4;
    if (ids_mapped(0, 1)) bad |= 8;
    ::_exit(bad);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  if (WEXITSTATUS(status) >= 100) GTEST_SKIP() << "no user namespace here (" << WEXITSTATUS(status) << ")";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "bit 1: 0 unmapped; 2: uid 1 mapped; 4: gid 70000 mapped; 8: gid 1 mapped";
}

}  // namespace
}  // namespace boxlite::guest

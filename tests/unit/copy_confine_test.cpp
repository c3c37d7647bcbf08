// The confinement of copy_out's extraction (core/copy.cpp, common/confine.hpp),
// applied in a child: as root, every mount read-only but the destination's, so
// that chmod, chown and utime (which Landlock does not cover) reach nothing else.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/capability.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "child_probe.hpp"
#include "common/confine.hpp"
#include "common/io.hpp"

namespace {

using boxlite::testing::expect;

[[noreturn]] void confine_as_a_copy_and_probe(const std::string& root) {
  std::string dest = root + "/dest";
  ::mkdir(dest.c_str(), 0755);
  boxlite::write_file_atomic(root + "/outside", "host file", 0644, false);
  boxlite::write_file_atomic(dest + "/old", "old", 0644, false);
  const std::string who = "test";
  boxlite::confine::no_new_privs(who);
  bool readonly = boxlite::confine::readonly_mounts_except(dest, who);
  expect(readonly, "every mount made read-only but the destination");
  boxlite::confine::keep_only_capabilities({CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER, CAP_FSETID}, who);
  int abi = boxlite::confine::landlock_abi();
  bool landlocked = boxlite::confine::restrict_writes_beneath(dest, abi, who);
  expect(landlocked == (abi >= 2), "Landlock applied wherever the kernel has ABI 2 or later");

  // What a copy does beneath its destination still works.
  int fd = ::open((dest + "/new").c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  expect(fd >= 0, "create in the destination");
  if (fd >= 0) ::close(fd);
  expect(::fchmodat(AT_FDCWD, (dest + "/new").c_str(), 0755, 0) == 0, "chmod in the destination");
  expect(::utimensat(AT_FDCWD, (dest + "/new").c_str(), nullptr, 0) == 0, "utime in the destination");
  expect(::rename((dest + "/new").c_str(), (dest + "/old").c_str()) == 0, "replace in the destination");
  expect(boxlite::read_file(root + "/outside") == "host file", "reads outside stay open");

  // Outside it, the mode, owner and times of a host file owned by the caller are
  // out of reach too.
  expect(::chmod((root + "/outside").c_str(), 04777) != 0 && errno == EROFS, "no chmod of a host file");
  expect(::utimensat(AT_FDCWD, (root + "/outside").c_str(), nullptr, 0) != 0, "no utime of a host file");
  expect(::chmod("/etc/passwd", 0666) != 0, "no chmod of /etc/passwd");
  expect(::open((root + "/planted").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600) < 0, "no file made outside");
  expect(::unlink((root + "/outside").c_str()) != 0, "no host file removed");
  // And nothing can be undone: the mounts stay read-only.
  expect(::mount(nullptr, "/", nullptr, MS_REMOUNT | MS_BIND, nullptr) != 0, "no remount");
  boxlite::testing::exit_with_probe_result();
}

TEST(CopyConfineTest, AsRootOnlyTheDestinationIsWritableAndModesOutsideItAreOutOfReach) {
  if (::geteuid() != 0) GTEST_SKIP() << "the read-only mount namespace is made as root only";
  char tmpl[] = "/tmp/blcopyconf-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  std::string root = tmpl;
  EXPECT_EXIT(confine_as_a_copy_and_probe(root), ::testing::ExitedWithCode(0), "");
  boxlite::remove_tree(root);
}

}  // namespace

// boxlite-pull's confinement (registry/confine.hpp), applied in a child: what a helper
// taken over by a hostile registry can still do.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/capability.h>
#include <linux/landlock.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

#include "child_probe.hpp"
#include "common/error.hpp"
#include "common/io.hpp"
#include "registry/confine.hpp"

namespace {

using boxlite::testing::expect;

bool creates(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  ::close(fd);
  return true;
}

std::string status_field(const std::string& name) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(name + ":", 0) == 0) return line.substr(name.size() + 1);
  }
  return "";
}

// Runs in the death test's child: exits 0 when every check holds.
[[noreturn]] void confine_and_probe(const std::string& root) {
  std::string store = root + "/store";
  ::mkdir(store.c_str(), 0700);
  ::mkdir((store + "/ingest").c_str(), 0700);
  ::mkdir((store + "/blobs").c_str(), 0700);
  boxlite::write_file_atomic(root + "/outside", "host file", 0644, false);
  // The kernel's Landlock ABI, asked here: confinement must use what the kernel has.
  long abi = ::syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  boxlite::registry::Confinement c = boxlite::registry::confine_pull_helper(store);
  expect(c.writes_confined == (abi >= 2), "writes confined wherever the kernel has Landlock ABI 2 or later");
  expect(c.signals_scoped == (abi >= 6), "signals scoped wherever the kernel has Landlock ABI 6 or later");

  expect(status_field("NoNewPrivs").find('1') != std::string::npos, "no_new_privs set");
  unsigned long long eff = std::stoull(status_field("CapEff"), nullptr, 16);
  unsigned long long kept = (1ULL << CAP_DAC_OVERRIDE) | (1ULL << CAP_DAC_READ_SEARCH) | (1ULL << CAP_FOWNER);
  expect((eff & ~kept) == 0, "no capability but the store's three");
  unsigned long long bnd = std::stoull(status_field("CapBnd"), nullptr, 16);
  if (::geteuid() == 0) expect((bnd & ~kept) == 0, "the bounding set reduced to them");

  // The store works as a pull uses it: a download in ingest/, renamed into blobs/.
  expect(creates(store + "/ingest/part"), "create in the store");
  expect(::rename((store + "/ingest/part").c_str(), (store + "/blobs/sha").c_str()) == 0, "rename ingest/ -> blobs/");
  expect(::unlink((store + "/blobs/sha").c_str()) == 0, "remove in the store");
  std::string read_back = boxlite::read_file(root + "/outside");
  expect(read_back == "host file", "reads outside stay open");

  if (c.writes_confined) {
    expect(!creates(root + "/planted"), "no file made outside the store");
    expect(::open((root + "/outside").c_str(), O_WRONLY | O_CLOEXEC) < 0 && errno == EACCES,
           "no host file opened for writing");
    expect(::unlink((root + "/outside").c_str()) != 0, "no host file removed");
    expect(::rename((store + "/blobs").c_str(), (root + "/moved").c_str()) != 0, "nothing moved out of the store");
    expect(::symlink("/etc/shadow", (root + "/link").c_str()) != 0, "no symlink made outside the store");
    pid_t pid = ::fork();
    if (pid == 0) {  // a program that runs exits 0: only a refused exec says 42
      char* const argv[] = {const_cast<char*>("/bin/true"), nullptr};
      ::execv("/bin/true", argv);
      ::_exit(errno == EACCES ? 42 : 1);
    }
    int status = 0;
    expect(pid > 0 && ::waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 42,
           "no program executed");
  } else {
    std::fprintf(stderr, "note: Landlock ABI %d: writes not confined on this kernel\n", c.landlock_abi);
  }
  // The syscall filter: what capabilities and Landlock leave to a uid-0 process.
  expect(::chmod((root + "/outside").c_str(), 0666) != 0 && errno == EPERM, "no chmod of a host file");
  expect(::chown((root + "/outside").c_str(), 65534, 65534) != 0 && errno == EPERM, "no chown of a host file");
  expect(::unshare(CLONE_NEWUSER) != 0 && errno == EPERM, "no user namespace (unshare)");
  expect(::syscall(SYS_clone3, nullptr, 0) != 0 && errno == ENOSYS, "clone3 answered ENOSYS, for glibc's fallback");
  bool ran = false;
  std::thread([&] { ran = true; }).join();  // libcurl's resolver starts threads
  expect(ran, "threads still start");
  if (c.signals_scoped) expect(::kill(::getppid(), 0) != 0 && errno == EPERM, "no signal to a process outside");
  boxlite::testing::exit_with_probe_result();
}

TEST(PullConfineTest, AConfinedHelperWritesOnlyBeneathItsStoreAndKeepsNoPrivilege) {
  char tmpl[] = "/tmp/blconfine-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  std::string root = tmpl;
  EXPECT_EXIT(confine_and_probe(root), ::testing::ExitedWithCode(0), "");
  boxlite::remove_tree(root);
}

}  // namespace

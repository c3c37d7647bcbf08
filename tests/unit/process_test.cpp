// common/process and common/io: closing a child's descriptors without close_range,
// capped capture of a tool's output, and a tool's error shortened.
#include "common/process.hpp"

#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstddef>
#include <string>

#include "common/fd.hpp"
#include "common/io.hpp"

namespace boxlite {
namespace {

// From now on this process's close_range(2) fails with ENOSYS, as on Linux < 5.9 or
// under a seccomp profile that refuses it. For a process of its own (it cannot be
// undone).
bool refuse_close_range_here() {
  sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_close_range, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog prog{static_cast<unsigned short>(sizeof filter / sizeof filter[0]), filter};
  return ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 && ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0;
}

// common/io's close_descriptors_from, shared by every child that does not exec:
// where close_range is refused it still closes all of them, numbers past 1024
// included (the loops to 1024 it replaced did not), and keeps those below `first`.
TEST(CloseDescriptorsFromTest, ClosesEveryDescriptorFromFirstUpEvenWithoutCloseRange) {
  pid_t tester = ::fork();
  ASSERT_GE(tester, 0);
  if (tester == 0) {
    if (!refuse_close_range_here()) ::_exit(10);
    if (::syscall(SYS_close_range, 3, ~0U, 0) == 0 || errno != ENOSYS) ::_exit(11);  // the filter holds
    rlimit many{4096, 4096};
    if (::setrlimit(RLIMIT_NOFILE, &many) != 0) ::_exit(12);
    int kept = ::open("/dev/null", O_RDONLY);  // below `first`
    int low = ::open("/dev/null", O_RDONLY);
    if (kept < 0 || low < 0 || ::dup2(low, 3000) != 3000) ::_exit(13);
    int first = low;
    if (!close_descriptors_from(first)) ::_exit(14);
    bool kept_open = ::fcntl(kept, F_GETFD) >= 0;
    bool low_closed = ::fcntl(low, F_GETFD) < 0, high_closed = ::fcntl(3000, F_GETFD) < 0;
    ::_exit(kept_open && low_closed && high_closed ? 0 : 20 + kept_open * 4 + low_closed * 2 + high_closed);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(tester, &status, 0), tester);
  ASSERT_TRUE(WIFEXITED(status)) << describe_status(status);
  EXPECT_EQ(WEXITSTATUS(status), 0) << "20 + 4*kept open + 2*low closed + high closed, or a set-up step";
}

}  // namespace
}  // namespace boxlite

namespace boxlite {
namespace {

// A tool that reports an error for each of a hostile box's million files must not
// fill the caller's memory: its stderr is kept up to a cap, the rest counted. Its
// output (which callers parse) is kept whole.
TEST(RunCaptureTest, KeepsStdoutBelowItsCapWholeAndCapsStderr) {
  RunResult r = run_capture({"/bin/sh", "-c", "head -c 3000000 /dev/zero | tr '\\0' e >&2; head -c 200000 /dev/zero"});
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.out.size(), 200000u);
  EXPECT_LE(r.err.size(), kMaxCapturedStderr + 64);
  EXPECT_NE(r.err.find("more bytes of errors)"), std::string::npos);
  EXPECT_NE(r.err.find(std::to_string(3000000 - kMaxCapturedStderr) + " more bytes"), std::string::npos)
      << r.err.substr(r.err.size() - 64);
}

TEST(RunCaptureTest, CapsStdoutAndCountsTheRest) {
  size_t total = kMaxCapturedStdout + 300000;
  RunResult r = run_capture({"/bin/sh", "-c", "head -c " + std::to_string(total) + " /dev/zero"});
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.out.size(), kMaxCapturedStdout);
  EXPECT_EQ(r.out_dropped, 300000u);
}

TEST(BriefToolErrorTest, FirstLineShortenedInTheMiddleAndTheRestCounted) {
  EXPECT_EQ(brief_tool_error("  cp: cannot stat 'x': No such file\n"), "cp: cannot stat 'x': No such file");
  std::string long_path(5000, 'd');
  std::string brief =
      brief_tool_error("cp: cannot create directory '" + long_path + "': File name too long\nline 2\nline 3\n");
  EXPECT_LT(brief.size(), 400u);
  EXPECT_EQ(brief.rfind("cp: cannot create directory 'ddd", 0), 0u) << brief;
  EXPECT_NE(brief.find("...ddd"), std::string::npos) << brief;
  EXPECT_NE(brief.find("': File name too long (and 2 more lines)"), std::string::npos) << brief;
}

}  // namespace
}  // namespace boxlite

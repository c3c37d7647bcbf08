// common/process and common/io: spawn_in_process gives its forked child what spawn() gives an
// exec'd one (the mapped descriptors and no other, default signals and an empty
// mask, a process group, its argv as the command line the kernel shows), never lets
// it run back into the caller's code, and execs argv[0] instead from a process
// with more than one thread.
#include "common/process.hpp"

#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <condition_variable>
#include <cstddef>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

#include "common/fd.hpp"
#include "common/io.hpp"

namespace boxlite {
namespace {

// Whether the kernel lets a process show another command line (PR_SET_MM_MAP,
// CONFIG_CHECKPOINT_RESTORE): without it the forked child execs argv[0].
bool can_move_command_line() {
  int size = 0;
  return ::prctl(PR_SET_MM, PR_SET_MM_MAP_SIZE, &size, 0, 0) == 0 && size > 0;
}

struct Pipe {
  UniqueFd read, write;
  Pipe() {
    int fds[2];
    EXPECT_EQ(::pipe2(fds, O_CLOEXEC), 0);
    read.reset(fds[0]);
    write.reset(fds[1]);
  }
};

std::string read_to_eof(int fd) {
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  return out;
}

void write_line(int fd, const std::string& line) {
  std::string l = line + "\n";
  (void)!::write(fd, l.data(), l.size());
}

// spawn_in_process forks only a caller with one thread.
bool single_threaded() {
  struct stat st;
  return ::stat("/proc/self/task", &st) == 0 && st.st_nlink == 3;
}

TEST(SpawnInProcessTest, TheChildGetsWhatAnExecdOneWouldAndItsOwnCommandLine) {
  if (!can_move_command_line()) GTEST_SKIP() << "no PR_SET_MM_MAP in this kernel (the child would exec argv[0])";
  ASSERT_TRUE(single_threaded()) << "a thread left over by an earlier test";
  Pipe report;
  // Inherited by anything this process starts (no CLOEXEC), yet not mapped: closed.
  UniqueFd stray(::open("/dev/null", O_RDONLY));
  ASSERT_TRUE(stray);
  struct sigaction handled {};
  handled.sa_handler = [](int) {};
  struct sigaction old_usr1 {};
  ASSERT_EQ(::sigaction(SIGUSR1, &handled, &old_usr1), 0);
  sigset_t usr2, old_mask;
  sigemptyset(&usr2);
  sigaddset(&usr2, SIGUSR2);
  ASSERT_EQ(::sigprocmask(SIG_BLOCK, &usr2, &old_mask), 0);

  SpawnOptions so;
  so.argv = {"/nonexistent/boxlite-test-child", "--flag", "value with spaces"};
  so.fds = {{report.write.get(), 3}};
  so.new_process_group = true;
  int stray_fd = stray.get();
  Child child = spawn_in_process(so, [stray_fd](int argc, char** argv) {
    write_line(3, "argc " + std::to_string(argc) + " argv[2] " + argv[2]);
    std::string cmdline = read_file("/proc/self/cmdline");
    for (char& c : cmdline) c = c == '\0' ? '|' : c;
    write_line(3, "cmdline " + cmdline);
    write_line(3, "comm " + read_file("/proc/self/comm"));
    write_line(3, std::string("stray ") + (::fcntl(stray_fd, F_GETFD) < 0 ? "closed" : "open"));
    struct sigaction now {};
    ::sigaction(SIGUSR1, nullptr, &now);
    write_line(3, std::string("usr1 ") + (now.sa_handler == SIG_DFL ? "default" : "handled"));
    sigset_t mask;
    ::sigprocmask(SIG_SETMASK, nullptr, &mask);
    write_line(3, std::string("usr2 ") + (sigismember(&mask, SIGUSR2) ? "blocked" : "unblocked"));
    write_line(3, std::string("group ") + (::getpgid(0) == ::getpid() ? "own" : "parent's"));
    return 7;
  });
  ::sigaction(SIGUSR1, &old_usr1, nullptr);
  ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  report.write.reset();
  std::string got = read_to_eof(report.read.get());
  int status = child.wait();
  ASSERT_TRUE(WIFEXITED(status)) << describe_status(status);
  EXPECT_EQ(WEXITSTATUS(status), 7) << got;
  EXPECT_EQ(got,
            "argc 3 argv[2] value with spaces\n"
            "cmdline /nonexistent/boxlite-test-child|--flag|value with spaces|\n"
            "comm boxlite-test-ch\n\n"
            "stray closed\n"
            "usr1 default\n"
            "usr2 unblocked\n"
            "group own\n");
}

TEST(SpawnInProcessTest, AnExceptionEndsTheChildNotTheCaller) {
  SpawnOptions so;
  so.argv = {"/bin/sh", "-c", "exit 9"};  // what the child would exec without PR_SET_MM_MAP
  so.stderr_path = "/dev/null";
  Child child = spawn_in_process(so, [](int, char**) -> int { throw std::runtime_error("thrown in the child"); });
  int status = child.wait();
  ASSERT_TRUE(WIFEXITED(status)) << describe_status(status);
  EXPECT_EQ(WEXITSTATUS(status), can_move_command_line() ? 1 : 9);
}

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

// What a fork checks or does that an exec did for it: a low descriptor limit is no
// reason to fail, and where close_range(2) is refused (an old kernel, a seccomp
// profile) the descriptors are closed one by one, never left to the child.
TEST(SpawnInProcessTest, ALowDescriptorLimitOrARefusedCloseRangeStillGivesAClosedChild) {
  if (!can_move_command_line()) GTEST_SKIP() << "no PR_SET_MM_MAP in this kernel (the child would exec argv[0])";
  for (bool refuse_close_range : {false, true}) {
    Pipe report;
    pid_t tester = ::fork();
    ASSERT_GE(tester, 0);
    if (tester == 0) {  // a process of its own: the limit and the filter stay in it
      rlimit low{64, 64};
      if (::setrlimit(RLIMIT_NOFILE, &low) != 0) ::_exit(10);
      int stray = ::open("/dev/null", O_RDONLY);  // no CLOEXEC: inherited unless closed
      if (stray < 0) ::_exit(11);
      if (refuse_close_range && !refuse_close_range_here()) ::_exit(12);
      SpawnOptions so;
      so.argv = {"/nonexistent/boxlite-test-child"};
      so.fds = {{report.write.get(), 3}};
      Child child = spawn_in_process(so, [stray](int, char**) {
        write_line(3, std::string("stray ") + (::fcntl(stray, F_GETFD) < 0 ? "closed" : "open"));
        return 7;
      });
      int status = child.wait();
      ::_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 13);
    }
    report.write.reset();
    std::string got = read_to_eof(report.read.get());
    int status = 0;
    ASSERT_EQ(::waitpid(tester, &status, 0), tester);
    ASSERT_TRUE(WIFEXITED(status)) << describe_status(status);
    EXPECT_EQ(WEXITSTATUS(status), 7) << "close_range refused: " << refuse_close_range;
    EXPECT_EQ(got, "stray closed\n") << "close_range refused: " << refuse_close_range;
  }
}

TEST(SpawnInProcessTest, ACallerWithAnotherThreadExecsArgv0Instead) {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::thread other([&] {
    std::unique_lock lk(mu);
    cv.wait(lk, [&] { return done; });
  });
  SpawnOptions so;
  so.argv = {"/bin/sh", "-c", "exit 9"};
  Child child = spawn_in_process(so, [](int, char**) { return 7; });
  int status = child.wait();
  {
    std::lock_guard lk(mu);
    done = true;
  }
  cv.notify_all();
  other.join();
  ASSERT_TRUE(WIFEXITED(status)) << describe_status(status);
  EXPECT_EQ(WEXITSTATUS(status), 9) << "forked with a second thread";
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

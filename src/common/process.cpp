#include "common/process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "common/error.hpp"
#include "common/io.hpp"

extern char** environ;

namespace boxlite {

Child& Child::operator=(Child&& o) noexcept {
  if (this != &o) {
    kill_now();
    pid_ = o.release();
  }
  return *this;
}

Child::~Child() { kill_now(); }

pid_t Child::release() {
  pid_t p = pid_;
  pid_ = -1;
  return p;
}

std::optional<int> Child::try_wait() {
  if (pid_ <= 0) return std::nullopt;
  int status;
  pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    pid_ = -1;
    return status;
  }
  return std::nullopt;
}

int Child::wait() {
  int status = 0;
  while (pid_ > 0 && ::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
  return status;
}

std::optional<int> Child::wait_for(int timeout_ms) {
  if (pid_ <= 0) return std::nullopt;
  if (auto st = try_wait()) return st;
  UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid_, 0)));
  double deadline = now_ms() + timeout_ms;
  for (;;) {
    int left = static_cast<int>(deadline - now_ms());
    if (left <= 0) return try_wait();
    if (pidfd) {
      pollfd p{pidfd.get(), POLLIN, 0};
      ::poll(&p, 1, left);
    } else {
      ::usleep(static_cast<useconds_t>(std::min(left, 5) * 1000));  // kernels before 5.3
    }
    if (auto st = try_wait()) return st;
  }
}

int Child::terminate(int grace_ms) {
  if (pid_ <= 0) return 0;
  ::kill(pid_, SIGTERM);
  if (auto st = wait_for(grace_ms)) return *st;
  ::kill(pid_, SIGKILL);
  return wait();
}

void Child::kill_now() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  wait();
}

Child spawn(const SpawnOptions& opts) {
  if (opts.argv.empty()) throw Error(ErrorKind::Internal, "spawn: empty argv");
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&fa);
  posix_spawnattr_init(&attr);
  short flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
  if (opts.new_session) {
    flags |= POSIX_SPAWN_SETSID;
  } else if (opts.new_process_group) {
    flags |= POSIX_SPAWN_SETPGROUP;
    posix_spawnattr_setpgroup(&attr, 0);
  }
  posix_spawnattr_setflags(&attr, flags);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  if (opts.stdin_null) posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  if (!opts.stdout_path.empty())
    posix_spawn_file_actions_addopen(&fa, 1, opts.stdout_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (!opts.stderr_path.empty())
    posix_spawn_file_actions_addopen(&fa, 2, opts.stderr_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  for (auto [from, to] : opts.fds) {
    if (from == to) {
      // dup2 onto itself does not clear CLOEXEC; bounce through a spare number.
      posix_spawn_file_actions_adddup2(&fa, from, 100 + to);
      posix_spawn_file_actions_adddup2(&fa, 100 + to, to);
      posix_spawn_file_actions_addclose(&fa, 100 + to);
    } else {
      posix_spawn_file_actions_adddup2(&fa, from, to);
    }
  }
  int first_unmapped = 3;
  for (auto [from, to] : opts.fds) first_unmapped = std::max(first_unmapped, to + 1);
  posix_spawn_file_actions_addclosefrom_np(&fa, first_unmapped);
  std::vector<char*> argv;
  for (const auto& a : opts.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid;
  char* no_env[] = {nullptr};
  int rc = posix_spawnp(&pid, argv[0], &fa, &attr, argv.data(), opts.empty_env ? no_env : environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) throw Error(ErrorKind::Internal, errno_text("spawn " + opts.argv[0], rc));
  return Child(pid);
}

std::string own_executable_dir() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "";
  std::string exe(buf, static_cast<size_t>(n));
  return exe.substr(0, exe.rfind('/'));
}

bool process_alive(pid_t pid) {
  if (pid <= 0 || ::kill(pid, 0) != 0) return false;
  try {
    std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
    auto close = stat.rfind(')');
    return close == std::string::npos || close + 2 >= stat.size() || stat[close + 2] != 'Z';
  } catch (const Error&) {
    return false;
  }
}

bool wait_pid_exit(pid_t pid, int timeout_ms) {
  if (!process_alive(pid)) return true;
  UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  double deadline = now_ms() + timeout_ms;
  while (process_alive(pid)) {
    int left = static_cast<int>(deadline - now_ms());
    if (left <= 0) return false;
    if (pidfd) {
      pollfd p{pidfd.get(), POLLIN, 0};
      ::poll(&p, 1, left);
    } else {
      ::usleep(5000);
    }
  }
  return true;
}

bool RunResult::ok() const { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }

RunResult run_capture(const std::vector<std::string>& argv) {
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0) throw_errno(ErrorKind::Internal, "pipe");
  UniqueFd out_r(out[0]), out_w(out[1]);
  if (::pipe2(err, O_CLOEXEC) != 0) throw_errno(ErrorKind::Internal, "pipe");
  UniqueFd err_r(err[0]), err_w(err[1]);
  SpawnOptions so;
  so.argv = argv;
  so.fds = {{out_w.get(), 1}, {err_w.get(), 2}};
  Child child = spawn(so);
  out_w.reset();
  err_w.reset();
  RunResult r;
  pollfd pfd[2] = {{out_r.get(), POLLIN, 0}, {err_r.get(), POLLIN, 0}};
  int open_count = 2;
  size_t err_dropped = 0;
  char buf[65536];
  while (open_count > 0) {
    if (::poll(pfd, 2, -1) < 0) {
      if (errno == EINTR) continue;
      throw_errno(ErrorKind::Internal, "poll");
    }
    for (int i = 0; i < 2; ++i) {
      if (pfd[i].fd < 0 || !(pfd[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t n = ::read(pfd[i].fd, buf, sizeof buf);
      if (n <= 0) {
        pfd[i].fd = -1;
        --open_count;
        continue;
      }
      auto got = static_cast<size_t>(n);
      std::string& kept = i == 0 ? r.out : r.err;
      size_t limit = i == 0 ? kMaxCapturedStdout : kMaxCapturedStderr;
      size_t keep = std::min(got, limit - std::min(limit, kept.size()));
      kept.append(buf, keep);
      (i == 0 ? r.out_dropped : err_dropped) += got - keep;
    }
  }
  if (err_dropped > 0) r.err += "\n... (" + std::to_string(err_dropped) + " more bytes of errors)";
  r.status = child.wait();
  return r;
}

std::string brief_tool_error(const std::string& err) {
  std::string text = trim(err);
  size_t eol = text.find('\n');
  std::string first = text.substr(0, eol);
  constexpr size_t kHead = 160, kTail = 120;
  if (first.size() > kHead + kTail + 3) first = first.substr(0, kHead) + "..." + first.substr(first.size() - kTail);
  if (eol == std::string::npos) return first;
  size_t more = static_cast<size_t>(std::count(text.begin() + static_cast<std::ptrdiff_t>(eol), text.end(), '\n'));
  return first + " (and " + std::to_string(more) + " more line" + (more == 1 ? "" : "s") + ")";
}

std::string describe_status(int status) {
  if (WIFEXITED(status)) return "exit code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("killed by signal ") + strsignal(WTERMSIG(status));
  return "status " + std::to_string(status);
}

std::string which(const std::string& name) {
  if (name.find('/') != std::string::npos) return ::access(name.c_str(), X_OK) == 0 ? name : "";
  const char* path = ::getenv("PATH");
  for (const auto& dir : split(path ? path : "/usr/local/bin:/usr/bin:/bin", ':')) {
    std::string p = (dir.empty() ? "." : dir) + "/" + name;
    struct stat st;
    if (::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0) return p;
  }
  return "";
}

uint64_t process_cpu_ns(pid_t pid) {
  std::string stat;
  try {
    stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  } catch (const Error&) {
    return 0;  // exited meanwhile
  }
  auto close = stat.rfind(')');  // the command name may hold spaces and parens
  if (close == std::string::npos) return 0;
  auto fields = split(stat.substr(close + 2), ' ');
  // After "(comm) ": state is field 3, utime..cstime are fields 14..17.
  if (fields.size() < 15) return 0;
  uint64_t ticks = 0;
  for (int i = 11; i <= 14; ++i) ticks += std::stoull(fields[static_cast<size_t>(i)]);
  return ticks * (1000000000ull / static_cast<uint64_t>(::sysconf(_SC_CLK_TCK)));
}

}  // namespace boxlite

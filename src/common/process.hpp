// Child processes: spawned with posix_spawn (safe from threaded callers), owned by
// RAII (a Child that goes out of scope unwaited is killed and reaped).
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "common/fd.hpp"

namespace boxlite {

struct SpawnOptions {
  std::vector<std::string> argv;
  // fd in this process -> fd number in the child. Every descriptor above the
  // highest one mapped is closed, including ones this process inherited without
  // CLOEXEC from whoever started it: none of them may reach a box. (Map from 3 up,
  // without gaps: a gap below the highest stays as inherited.)
  std::vector<std::pair<int, int>> fds;
  std::string stdout_path;  // "" = inherit
  std::string stderr_path;  // "" = inherit
  bool stdin_null = true;
  // A session of its own (outlives the terminal: detached boxes), or only a
  // process group of its own (out of reach of the terminal's ^C). setsid() also
  // makes a scheduler autogroup, which can cost a few ms (an RCU grace period).
  bool new_session = false;
  bool new_process_group = false;
  bool empty_env = false;  // the child gets no environment at all (not this process's)
};

class Child {
 public:
  Child() = default;
  explicit Child(pid_t pid) : pid_(pid) {}
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  Child(Child&& o) noexcept : pid_(o.release()) {}
  Child& operator=(Child&& o) noexcept;
  ~Child();

  pid_t pid() const { return pid_; }
  bool valid() const { return pid_ > 0; }
  pid_t release();
  // Non-blocking: the wait status once exited.
  std::optional<int> try_wait();
  int wait();
  // Waits up to timeout_ms for the exit (pidfd + poll, no sleeping loop).
  std::optional<int> wait_for(int timeout_ms);
  // SIGTERM, up to grace_ms, then SIGKILL; always reaps.
  int terminate(int grace_ms);
  void kill_now();

 private:
  pid_t pid_ = -1;
};

Child spawn(const SpawnOptions& opts);

// For a process that is not our child: alive (and not a zombie)?
bool process_alive(pid_t pid);
// Waits up to timeout_ms for any process to exit (pidfd + poll). True if it did.
bool wait_pid_exit(pid_t pid, int timeout_ms);

struct RunResult {
  int status = 0;  // raw wait status
  std::string out, err;
  size_t out_dropped = 0;  // stdout bytes read past kMaxCapturedStdout, not kept
  bool ok() const;
};
// Runs a helper tool to completion, capturing its output (no shell). Its stderr is
// kept up to kMaxCapturedStderr bytes (the rest is read and counted, not kept): a
// tool walking a hostile box's files can report an error for each of millions.
// Its stdout likewise up to kMaxCapturedStdout (`out_dropped` says how much more
// there was): what the callers parse (qemu-img's JSON) is a few KiB.
inline constexpr size_t kMaxCapturedStderr = 64 * 1024;
inline constexpr size_t kMaxCapturedStdout = 4 * 1024 * 1024;
RunResult run_capture(const std::vector<std::string>& argv);
std::string describe_status(int status);
// A tool's error output for a message: its first line, at most ~300 characters (a
// long path in it shortened in the middle), and how many lines followed.
std::string brief_tool_error(const std::string& err);
// The directory of this process's executable (/proc/self/exe), or "".
std::string own_executable_dir();
// Where a binary lives on PATH, or "".
std::string which(const std::string& name);

// CPU time of one process including its reaped children (/proc/PID/stat), or 0.
uint64_t process_cpu_ns(pid_t pid);

}  // namespace boxlite

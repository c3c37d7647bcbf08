// Starting one exec's process: path lookup, identity, stdio (pipes or a PTY).
#pragma once

#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <string>
#include <vector>

#include "common/fd.hpp"
#include "common/io.hpp"

namespace boxlite::guest {

// How the box's first process gets a /proc of the box's own PID namespace (the
// one it is PID 1 of) before it runs anything: until a process exists in that
// namespace there is no such /proc to mount, and whatever the box sees at /proc
// numbers processes as the agent's namespace does.
struct ProcSwap {
  enum class Mode {
    kNone,       // /proc is in place already (a jail's first process put it there)
    kMountHere,  // VM: the child has the agent's capabilities and mounts it itself
  };
  Mode mode = Mode::kNone;
};

// Does the swap from inside the first process (memory-safe in a CLONE_VM child:
// syscalls only). 0, or an errno.
int put_box_proc_in_place(const ProcSwap& swap) noexcept;

// A jail box's first process (engine/jail/box_init.hpp), forked by the init: PID 1
// of the box's PID namespace, its /proc in place, waiting on `socket` for what to
// run. The agent hands it the main command (or the holder init) instead of
// starting a process of its own.
struct WaitingFirstProcess {
  pid_t pid = -1;  // in the agent's PID namespace
  int socket = -1;
};

// The first process's side: reads its plan from `plan_fd` and runs it (execs the
// command, or becomes the holder init), or reports `early_stage` and
// `early_errno` (what failed before: box_init.hpp) on the plan's report pipe.
[[noreturn]] void serve_first_process(int plan_fd, int early_stage, int early_errno);

// Waits until the first process is in the box's network namespace and has detached
// the host's root from the box's (engine/jail/box_init.cpp): before that the agent
// may not touch a path of the box's. Throws Error(Engine) with the step that failed.
void await_first_process_isolated(const WaitingFirstProcess& first);

// PID 1 of the box's namespace when there is no main command: reaps orphans and
// otherwise waits, so the namespace (and the box) lives until it is stopped.
[[noreturn]] void run_holder_init();

// Makes the waiting first process the holder init; throws Error(Engine) when it
// cannot be (its hardening failed).
void start_holder_in(const WaitingFirstProcess& first);

// The box's SecurityOptions rlimits (BoxConfig.limits: a VM's; a jail's init set
// them for the whole box). Each is set as both soft and hard limit in the child,
// before it takes its user's ids; 0 = not limited.
struct ResourceLimits {
  uint64_t nofile = 0, fsize = 0, nproc = 0, as = 0, cpu = 0;
};

struct SpawnRequest {
  std::vector<std::string> argv;
  std::vector<std::string> env;  // final K=V list
  std::string cwd;
  std::string user;  // "" = root
  bool tty = false;
  unsigned rows = 24, cols = 80;
  bool stdin_open = false;
  // Non-empty: the child runs this builtin (guest/copy.hpp) instead of argv.
  std::string builtin;
  std::vector<std::string> builtin_args;
  ProcSwap proc_swap;  // the box's first process only
  // The box's first process only, in a jail: it runs the command (never a builtin).
  const WaitingFirstProcess* first_process = nullptr;
  // > 0: the command runs on this many of the agent's CPUs, starting with the one its
  // process is on (no migration at the start): a jail box's `cpus` (BoxConfig.cpus).
  unsigned cpus = 0;
  ResourceLimits limits;
};

struct Spawned {
  pid_t pid = -1;         // in the agent's PID namespace (waitpid, kill)
  pid_t pid_in_box = -1;  // what the box itself calls it (reported to the host)
  UniqueFd stdin_fd;      // write end (or the PTY master), invalid when stdin is closed
  UniqueFd stdout_fd;     // read end (or the PTY master)
  UniqueFd stderr_fd;     // read end; invalid with a PTY (merged into stdout)
};

// Throws Error(Execution) whose message starts "spawn_failed:" when the process
// cannot be started (missing binary, bad cwd, unknown user, exec failure).
Spawned spawn_process(const SpawnRequest& req);

// Looks up K in a K=V list.
const std::string* env_lookup(const std::vector<std::string>& env, const std::string& key);
// Merges `over` onto `base` (later keys replace earlier ones, order kept).
std::vector<std::string> env_merge(const std::vector<std::string>& base, const std::vector<std::string>& over);

}  // namespace boxlite::guest

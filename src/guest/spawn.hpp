// Starting one exec's process: path lookup, identity, stdio (pipes or a PTY).
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "common/fd.hpp"

namespace boxlite::guest {

// How the box's first process gets a /proc of the box's own PID namespace (the
// one it is PID 1 of) before it runs anything: until a process exists in that
// namespace there is no such /proc to mount, and whatever the box sees at /proc
// numbers processes as the agent's namespace does.
struct ProcSwap {
  enum class Mode {
    kNone,       // /proc is in place already
    kMountHere,  // VM: the child has the agent's capabilities and mounts it itself
    kAskHelper,  // jail: the init's helper mounts it (the agent has no CAP_SYS_ADMIN)
  };
  Mode mode = Mode::kNone;
  int helper_gate = -1;  // kAskHelper: send a byte and our PID namespace, read back an int errno (0: done)
};

// Does the swap from inside the first process (memory-safe in a CLONE_VM child:
// syscalls only). 0, or an errno.
int put_box_proc_in_place(const ProcSwap& swap) noexcept;

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
  // > 0: the command runs on this many of the agent's CPUs, starting with the one the
  // agent is on (no migration at the start): a jail box's `cpus` (BoxConfig.cpus).
  unsigned cpus = 0;
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

// PATH lookup the way execvp does it, without executing; "" when not found.
std::string find_in_path(const std::string& file, const std::string& path_var);

// Looks up K in a K=V list.
const std::string* env_lookup(const std::vector<std::string>& env, const std::string& key);
// Merges `over` onto `base` (later keys replace earlier ones, order kept).
std::vector<std::string> env_merge(const std::vector<std::string>& base, const std::vector<std::string>& over);

}  // namespace boxlite::guest

// The agent's entry in a jail box: called by the box's init once it has made the
// box's root and hardened itself (engine/jail), in the same process: no exec.
#pragma once

namespace boxlite::guest {

// Serves the host on `channel_fd` until the box stops; `first_process_fd` reaches
// the box's first process (pid `first_process_pid`), which waits there for the main
// command (guest/spawn.hpp). Returns the process's exit status.
int run_jail_agent(int channel_fd, int first_process_fd, int first_process_pid);

}  // namespace boxlite::guest

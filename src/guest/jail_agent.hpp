// The agent's entry in a jail box: called by the box's init once it has made the
// box's root and hardened itself (engine/jail), in the same process: no exec.
#pragma once

namespace boxlite::guest {

// Serves the host on `channel_fd` until the box stops; `proc_gate_fd` reaches the
// helper that mounts the box's own /proc for the first process. Returns the
// process's exit status.
int run_jail_agent(int channel_fd, int proc_gate_fd);

}  // namespace boxlite::guest

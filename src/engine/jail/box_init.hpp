// The box's side of the jail engine, shared by the shim (which asks) and
// boxlite-guest (which answers): the shim spawns `boxlite-guest --jail-zygote 3`
// as it starts, before it knows its box; to start the box it sends the zygote a
// request (its InitParams), and the zygote clones the box's init, which makes the box's root,
// hardens itself and runs the agent in place (docs/jail.md, "The agent without an
// exec").
#pragma once

#include <cstddef>
#include <cstdint>

namespace boxlite::engine::jail {

// The box's agent, which the box's init runs once the box is set up: given the
// channel and the /proc helper's gate, it returns the init's exit status.
using AgentMain = int (*)(int channel_fd, int proc_gate_fd);

// What a shim and a zygote must agree on, beyond the struct's size: a zygote of
// another build refuses the request (EPROTO) before anything is made. 2: the init
// gets its network namespace from its /proc helper, not from the clone (a shim of
// version 1 would make its box's TAP device in its own namespace, the host's).
inline constexpr uint32_t kInitProtocolVersion = 2;

// What the box's init is told: nothing of the host's but what the box itself may
// know (the spec's network secrets stay in the shim).
struct InitParams {
  uint32_t version;   // kInitProtocolVersion
  char hostname[65];  // NUL-terminated (Linux allows 64)
  bool seccomp;
  // The box's /proc is mounted from a process inside its PID namespace (kernels
  // before 6.15, whose proc has no `pidns=`; BOXLITE_JAIL_PROC_VIA_SETNS=1 forces it).
  bool proc_via_setns;
  uint64_t rlimit_nofile, rlimit_fsize, rlimit_nproc, rlimit_as, rlimit_cpu;
};

// The request is one InitParams with (SCM_RIGHTS) the shim's mount namespace, the
// box root, the init's sync pipe, report pipe and channel, then its cgroup `tasks`
// files (v1): at most kMaxPassedFds (common/io.hpp) in all.
//
// boxlite-guest --jail-zygote FD: waits for one request on FD, clones the box's
// init into new user, pid, mount, uts and ipc namespaces (a child of the shim's:
// CLONE_PARENT), answers with its pid or -errno and exits; at EOF it exits. The
// init gets its network namespace from its /proc helper while it makes the box's
// root, and sends it to the shim on the channel (a byte, "n", with the namespace)
// before the agent says anything there.
[[noreturn]] void serve_zygote(int sock, AgentMain agent);

}  // namespace boxlite::engine::jail

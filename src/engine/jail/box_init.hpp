// The box's side of the jail engine, shared by the shim (which asks) and
// boxlite-guest (which answers): the shim spawns `boxlite-guest --jail-zygote 3`
// as it starts, before it knows its box; to start the box it sends the zygote a
// request (its InitParams), and the zygote clones the box's init, which makes the box's root,
// hardens itself and runs the agent in place (docs/jail.md, "The agent without an
// exec").
#pragma once

#include <cerrno>
#include <cstddef>
#include <cstdint>

namespace boxlite::engine::jail {

// The box's first process: PID 1 of the box's PID namespace, forked by the init
// before it dropped its capabilities, so that it mounts the box's own /proc itself
// while the init makes the rest of the root (docs/jail.md, "The box's /proc").
// Hardened as the init is, it then waits on `plan_fd` for what to run
// (guest/spawn.hpp); `early_stage` and `early_errno` say what failed before that,
// if anything (0: nothing).
using FirstProcessMain = void (*)(int plan_fd, int early_stage, int early_errno);
// What FirstProcessMain reports as `early_stage` (guest/spawn.cpp names them): its
// rlimits, capabilities, no_new_privs or seccomp filter; the host's root, which it
// detaches once the init has pivoted into the box's. (The box's network namespace,
// which it makes first of all, is the init's to report: 13 is no longer used.)
inline constexpr int kFirstProcessHardeningFailed = 12;
inline constexpr int kFirstProcessDetachFailed = 14;

// What to add to a failed namespace creation's message, so that it says what to do
// (errno alone does not): the kernel answers ENOSPC when a host limit
// (/proc/sys/user/max_*_namespaces) is reached, EPERM when a policy forbids it (a
// container without CAP_SYS_ADMIN, seccomp, an LSM). Empty otherwise. No allocation:
// the box's processes call it where only async-signal-safe code runs.
inline const char* namespace_refusal_hint(int err, bool network) {
  if (err == ENOSPC) {
    return network ? " (the host's limit on network namespaces is reached: raise user.max_net_namespaces)"
                   : " (a host limit on namespaces is reached: raise user.max_user_namespaces, "
                     "user.max_pid_namespaces, user.max_mnt_namespaces, user.max_uts_namespaces and "
                     "user.max_ipc_namespaces, as sysctl shows them)";
  }
  if (err == EPERM || err == EACCES) {
    return " (this host does not let boxlite make namespaces: inside a container without CAP_SYS_ADMIN, or a "
           "seccomp or LSM policy)";
  }
  return "";
}

// The box's agent, which the box's init runs once the box is set up: given the
// channel, and the socket to the waiting first process and its pid (in the agent's
// PID namespace), it returns the init's exit status.
using AgentMain = int (*)(int channel_fd, int first_process_fd, int first_process_pid);

struct BoxPrograms {
  AgentMain agent;
  FirstProcessMain first_process;
};

// What a shim and a zygote must agree on, beyond the struct's size: a zygote of
// another build refuses the request (EPROTO) before anything is made. 2: the init
// gets its network namespace from its helper, not from the clone (a shim of
// version 1 would make its box's TAP device in its own namespace, the host's). 3: the
// box's /proc is the first process's to mount (InitParams lost proc_via_setns). 4:
// the box's first process makes the network namespace (the helper is gone).
inline constexpr uint32_t kInitProtocolVersion = 4;

// What the box's init is told: nothing of the host's but what the box itself may
// know (the spec's network secrets stay in the shim).
struct InitParams {
  uint32_t version;   // kInitProtocolVersion
  char hostname[65];  // NUL-terminated (Linux allows 64)
  bool seccomp;
  uint64_t rlimit_nofile, rlimit_fsize, rlimit_nproc, rlimit_as, rlimit_cpu;
};

// The request is one InitParams with (SCM_RIGHTS) the shim's mount namespace, the
// box root, the init's sync pipe, report pipe and channel, then its cgroup `tasks`
// files (v1): at most kMaxPassedFds (common/io.hpp) in all.
//
// boxlite-guest --jail-zygote FD: waits for one request on FD, clones the box's
// init into new user, pid, mount, uts and ipc namespaces (a child of the shim's:
// CLONE_PARENT), answers with its pid or -errno and exits; at EOF it exits. The
// box's first process makes its network namespace while the init makes the box's
// root, and sends it to the shim on the channel (a byte, "n", with the namespace)
// before the init has it, so before the agent says anything there.
[[noreturn]] void serve_zygote(int sock, BoxPrograms programs);

}  // namespace boxlite::engine::jail

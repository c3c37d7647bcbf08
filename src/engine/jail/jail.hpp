// The jail engine: the box's guest agent as PID 1 of new user, pid, mount, uts,
// ipc, net and cgroup namespaces, in an overlayfs root, hardened (seccomp,
// capabilities, masked /proc, read-only /sys, rlimits, cgroup limits).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/fd.hpp"
#include "common/process.hpp"
#include "engine/jail/box_init.hpp"
#include "engine/spec.hpp"

namespace boxlite::engine::jail {

// Box uid 0..kUidCount-1 maps to host uid offset..offset+kUidCount-1.
inline constexpr unsigned kUidCount = 65536;
inline constexpr unsigned kDefaultUidOffset = 1u << 20;
inline constexpr int kDefaultPidsLimit = 4096;
// A spec's jail part starts with them too (JailSpec's defaults; tests/unit/plan_test.cpp).

struct Jail {
  Child init;                         // the box's PID 1 (the guest agent)
  UniqueFd channel;                   // host end of the agent channel
  std::vector<std::string> warnings;  // limits that could not be enforced
  bool etc_files_bound = false;       // /etc/hosts and /etc/resolv.conf (bind_etc_files)
};

// The box's init is cloned from a zygote, `boxlite-guest --jail-zygote` (box_init.hpp),
// which the shim spawns as it starts, before it knows its box: so the init runs the
// agent without an exec on the start's critical path (~1 ms less), in a process of
// its own image (its own address layout, stack canary and pointer guard; no
// environment) that has seen nothing of the shim's spec. One init per zygote; one
// that is never asked exits when released.
class Zygote {
 public:
  // Spawns boxlite-guest from `libexec_dir`. One that could not be started says why
  // when a box's init is asked of it.
  static Zygote start(const std::string& libexec_dir);
  Zygote() = default;
  Zygote(Zygote&&) noexcept = default;
  Zygote& operator=(Zygote&&) noexcept = default;
  ~Zygote();
  bool usable() const { return process_.valid(); }
  // Lets it go (it exits) and reaps it.
  void release();

 private:
  friend Jail start(const ShimSpec&, Zygote&, const std::function<void(int)>&);
  // The box's init, cloned into the box's namespaces with its cwd at `root` in
  // this process's mount namespace; `fds` are ChildArgs's, in order. A child of
  // this process (CLONE_PARENT).
  pid_t clone_init(const InitParams& params, const std::string& root, const std::vector<int>& fds);

  UniqueFd sock_;
  Child process_;
  std::string failure_;  // why there is none
  std::string binary_;   // the boxlite-guest it runs
};

// Where the shim mounts the box's root (ShimSpec::root_mountpoint).
std::string root_mountpoint(const ShimSpec& spec);

// Early in the shim: a private mount namespace, so the box's overlay and every
// mount under it disappear with the shim, however it dies. Later calls do nothing.
void enter_private_mount_namespace();

// Mounts the box root and starts the agent in its namespaces, its init cloned by
// `zygote`. Throws Error naming the step that failed. `once_cloned(netns_fd)`, when
// given, runs once the box's namespaces exist and its init has been let go, with
// the box's network namespace: the caller's setup that needs only that (its
// network) overlaps the init's own (its root). The agent cannot run a command
// before the caller configures it.
Jail start(const ShimSpec& spec, Zygote& zygote, const std::function<void(int)>& once_cloned = {});

// What the box's cgroups account: CPU time and memory in use. nullopt when the
// box has no cgroup (limits could not be applied on this host).
struct Usage {
  uint64_t cpu_ns = 0;
  uint64_t memory_bytes = 0;
};
std::optional<Usage> usage(const std::string& box_id);

// cgroup v2 hosts: the first cgroup attach after a quiet spell waits for an RCU
// grace period (~10 ms: the kernel's cgroup_threadgroup_rwsem switching to its
// writer mode), and the mode lasts about one more grace period after the last
// attach. Called as a jail box is created or started, this makes a no-op attach
// (this process into its own cgroup) on a short-lived thread, so that wait
// overlaps the work before the shim attaches the box. Best effort. (On v1 the
// box's init moves itself, which takes no such lock.)
void prime_cgroup_attach();

// Whether this host lets a box's namespaces be made (limits, a container, a
// policy): a child is cloned into new user, pid, mount, uts, ipc and cgroup
// namespaces, then one into a new network namespace, each exiting at once. Empty
// if both were made, else what failed and what to do. For `info`: ~1-2 ms.
std::string namespaces_refused();

// Removes the box's cgroups (after its processes are gone). Safe to call twice.
void remove_cgroups(const std::string& box_id);

// Freezes every process of a running box (the cgroup freezer: v1 moves them into
// freezer/boxlite/<id>, v2 uses cgroup.freeze) so its upper layer holds still while
// it is copied (a snapshot, clone or export of the running box); thaw() resumes
// them. Unsupported when the box has no cgroups; Engine when they do not freeze.
void freeze(const std::string& box_id);
void thaw(const std::string& box_id);

// A user namespace holding the given uid_map and gid_map lines, for a volume's
// idmapped mount (MOUNT_ATTR_IDMAP). A child parked in it while the maps are
// written dies with the caller however the caller dies. Needs CAP_SETUID and
// CAP_SETGID for the ids mapped.
UniqueFd make_idmap_userns(const std::string& uid_map, const std::string& gid_map);

}  // namespace boxlite::engine::jail

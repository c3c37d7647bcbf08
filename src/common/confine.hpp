// Confining a process that parses hostile data on the host: boxlite-pull (a
// registry's answers) and the child that unpacks a box's `cp` stream. Each step is
// the calling thread's own and inherited by threads and children started later:
// call them before starting any thread.
#pragma once

#include <initializer_list>
#include <string>

namespace boxlite::confine {

// PR_SET_NO_NEW_PRIVS. `who` names the process in errors.
void no_new_privs(const std::string& who);

// Every capability but `keep` dropped from the effective, permitted and inheritable
// sets and (with CAP_SETPCAP) the bounding set; the ambient set cleared.
void keep_only_capabilities(std::initializer_list<int> keep, const std::string& who);

// The kernel's Landlock ABI version; 0 when it has none or it is not enabled.
int landlock_abi();

// With Landlock ABI 2 or later: every write, removal, rename, truncation, link and
// exec refused outside `dir`, and beneath it exec and device nodes. ABI 6 and
// later also keep signals and abstract unix sockets within the process. ABI 1
// refused every rename across directories, which both users need: below 2 this
// does nothing and returns false. An empty `dir` allows writes nowhere.
bool restrict_writes_beneath(const std::string& dir, int abi, const std::string& who);

// As root: a mount namespace of the process's own where every mount is read-only
// but `dir` (bound over itself, with what is mounted below it). Landlock does not
// cover chmod, chown or utime, which a uid-0 process may otherwise do to every
// root-owned file; a read-only mount refuses them. Call it before
// keep_only_capabilities drops CAP_SYS_ADMIN. Does nothing and returns false when
// not root, or when the kernel refuses (no mount_setattr before Linux 5.12, a
// seccomp profile of a container): Landlock then is what confines writes. An empty
// `dir` leaves nothing writable.
bool readonly_mounts_except(const std::string& dir, const std::string& who);

}  // namespace boxlite::confine

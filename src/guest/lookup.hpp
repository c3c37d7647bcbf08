// What an exec's process will run and as whom, decided by the agent before the child
// starts: a path as the command's working directory sees it, a PATH lookup done the way
// execvp does it there, and whether the agent's user namespace maps an id. Its own
// translation unit so that the host's unit tests link it (as guest/users.cpp).
#pragma once

#include <sys/types.h>

#include <string>

namespace boxlite::guest {

// `path` as a process whose working directory is `dir` (absolute) sees it: a
// relative one is taken from `dir`, as an execve after the chdir would take it.
std::string path_in_dir(const std::string& dir, const std::string& path);

// PATH lookup the way execvp does it in the command's working directory `dir`,
// without executing. A relative entry ("", ".", "bin") and a relative `file` with a
// slash are looked for from `dir`, not from the agent's "/", and the path returned is
// the one execvp would hand execve there: relative where the entry or `file` is
// ("tool" for an empty entry, "./tool" for ".", "bin/tool" for "bin"), so a script's
// $0 is what runc's would be. The command's child execs it after its chdir to `dir`.
// "" when not found.
std::string find_in_path(const std::string& file, const std::string& path_var, const std::string& dir);

// Whether the agent's user namespace maps `uid` and `gid` (-1: not asked), as the
// kernel decides when the child sets them: chown refuses an id it cannot map with
// EINVAL before it checks any permission, so chowning a memfd of the agent's own
// asks it. A jail's agent cannot read its /proc/self/uid_map: it is outside the box's
// PID namespace, whose /proc is the one mounted. True when the kernel cannot be asked.
bool ids_mapped(uid_t uid, gid_t gid);

}  // namespace boxlite::guest

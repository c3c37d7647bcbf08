// Making a mount point inside a root a hostile image controls: every component
// resolves with openat2(RESOLVE_IN_ROOT), so a symlink such as /workspace -> /etc
// in the image stays inside the image's root instead of reaching the host's (or
// the initramfs's) /etc.
#pragma once

#include <string>

#include "common/error.hpp"
#include "common/fd.hpp"

namespace boxlite {

// openat2(RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS) of `path` (absolute or relative,
// it stays under root_fd either way) with `flags` and O_CLOEXEC; empty on failure
// (errno says why). O_NOFOLLOW keeps a symlink at the last component as it is.
UniqueFd open_in_root(int root_fd, const std::string& path, int flags);

// Creates the directories of the absolute path `path` under root_fd (mode 0755,
// owned by the caller) and returns an O_PATH fd of the last one. Throws
// Error(code) naming the component that failed (a non-directory on the way too).
UniqueFd make_dirs_in_root(int root_fd, const std::string& path, ErrorKind code);

}  // namespace boxlite

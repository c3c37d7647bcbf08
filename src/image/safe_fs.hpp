// Internal to boxlite_image: filesystem primitives that treat a directory as "/"
// and never follow a symlink out of it. Errors are Image errors with errno text;
// callers add the layer/entry context.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>
#include <vector>

#include "common/fd.hpp"

namespace boxlite::image::detail {

using Components = std::vector<std::string>;

// Lexically cleans a tar path: drops leading '/', empty and "." components, and
// applies ".." without ever going above the root ("../../etc/x" -> {"etc","x"}).
Components clean_path(std::string_view path);
std::string join_path(const Components& c, size_t count);

// Who owns the directories open_dir_in_root creates.
struct Owner {
  uid_t uid = 0;
  gid_t gid = 0;
};

// Opens (O_PATH) the directory named by the first `count` components, with root_fd
// acting as "/": symlinks on the way are followed but confined to the root, ".."
// stops at the root. create=true makes missing directories (0755, chowned to
// *owner when given, else the caller's); otherwise a missing directory gives an
// invalid fd. A non-directory on the way throws.
UniqueFd open_dir_in_root(int root_fd, const Components& path, size_t count, bool create, const Owner* owner = nullptr);

// Removes `name` in dir_fd, recursively if it is a directory, never following
// symlinks. A missing name is not an error.
void remove_at(int dir_fd, const std::string& name);

// The names in a directory (without "." and "..").
std::vector<std::string> list_dir(int dir_fd);

// The fd of `name` in dir_fd as O_PATH|O_DIRECTORY|O_NOFOLLOW, or invalid if it is
// not a directory (or gone).
UniqueFd open_subdir(int dir_fd, const std::string& name);

}  // namespace boxlite::image::detail

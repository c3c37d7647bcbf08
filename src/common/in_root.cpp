#include "common/in_root.hpp"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/error.hpp"
#include "common/io.hpp"

namespace boxlite {

UniqueFd open_in_root(int root_fd, const std::string& path, int flags) {
  open_how how{};
  how.flags = static_cast<uint64_t>(flags) | O_CLOEXEC;
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  for (;;) {
    int fd = static_cast<int>(::syscall(SYS_openat2, root_fd, path.c_str(), &how, sizeof how));
    if (fd >= 0 || errno != EAGAIN) return UniqueFd(fd);
  }
}

UniqueFd make_dirs_in_root(int root_fd, const std::string& path, ErrorKind code) {
  auto parts = split(path, '/');
  std::string rel;
  UniqueFd cur(::fcntl(root_fd, F_DUPFD_CLOEXEC, 0));
  if (!cur) throw_errno(code, "dup root fd");
  int links = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string part = parts[i];
    if (part.empty() || part == ".") continue;
    std::string next = rel.empty() ? part : rel + "/" + part;
    // mkdirat never follows a final symlink (EEXIST); the open below resolves it in the root.
    if (::mkdirat(cur.get(), part.c_str(), 0755) != 0 && errno != EEXIST)
      throw_errno(code, "create mount point /" + next);
    UniqueFd opened = open_in_root(root_fd, next, O_PATH | O_DIRECTORY);
    if (!opened && errno == ENOENT) {
      // A dangling symlink: go on from its target, read as a path inside the root
      // (an absolute target starts again at the root), like runc does.
      char target[4096];
      ssize_t n = ::readlinkat(cur.get(), part.c_str(), target, sizeof target - 1);
      if (n <= 0 || ++links > 40) throw_errno(code, "open mount point /" + next + " inside the box root");
      std::string rest(target, static_cast<size_t>(n));
      for (size_t j = i + 1; j < parts.size(); ++j) rest += "/" + parts[j];
      if (rest[0] != '/') rest = "/" + rel + "/" + rest;
      parts = split(rest, '/');
      rel.clear();
      cur = UniqueFd(::fcntl(root_fd, F_DUPFD_CLOEXEC, 0));
      if (!cur) throw_errno(code, "dup root fd");
      i = static_cast<size_t>(-1);  // restart the walk from the root
      continue;
    }
    if (!opened) throw_errno(code, "open mount point /" + next + " inside the box root");
    cur = std::move(opened);
    rel = next;
  }
  return cur;
}

}  // namespace boxlite

#include "image/safe_fs.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <deque>
#include <memory>

#include "common/error.hpp"
#include "common/io.hpp"

namespace boxlite::image::detail {

namespace {

// Same limit as the kernel's path walk.
constexpr int kMaxSymlinks = 40;
// Deep enough for any real image; bounds recursion (stack and one fd per level)
// when removing trees a hostile image built.
constexpr int kMaxRemoveDepth = 256;

UniqueFd dup_fd(int fd) {
  UniqueFd out(::fcntl(fd, F_DUPFD_CLOEXEC, 0));
  if (!out) throw_errno(ErrorKind::Image, "dup directory fd");
  return out;
}

std::string read_link_at(int dir_fd, const std::string& name) {
  std::string buf(4096, '\0');
  ssize_t n = ::readlinkat(dir_fd, name.c_str(), buf.data(), buf.size());
  if (n < 0) throw_errno(ErrorKind::Image, "readlink " + name);
  buf.resize(static_cast<size_t>(n));
  return buf;
}

// openat2 does the whole confined walk in one syscall; -1 with errno on failure.
// EAGAIN means a rename somewhere on the system raced a ".." step: try again a few
// times before the caller falls back to the step-by-step walk.
int openat2_in_root(int root_fd, const std::string& rel) {
  open_how how{};
  how.flags = O_PATH | O_DIRECTORY | O_CLOEXEC;
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  for (int attempt = 0;; ++attempt) {
    int fd = static_cast<int>(::syscall(SYS_openat2, root_fd, rel.c_str(), &how, sizeof how));
    if (fd >= 0 || errno != EAGAIN || attempt >= 8) return fd;
  }
}

// The directory reached from the root by these real (non-symlink) names, each
// opened O_NOFOLLOW: how ".." is taken, so that a directory moved elsewhere while
// we stand in it cannot lead the walk out of the root.
UniqueFd reopen_from_root(int root_fd, const std::vector<std::string>& names) {
  UniqueFd cur = dup_fd(root_fd);
  for (const auto& n : names) {
    UniqueFd next(::openat(cur.get(), n.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!next) throw_errno(ErrorKind::Image, "reopen directory " + n + " (changed during the walk)");
    cur = std::move(next);
  }
  return cur;
}

// The same semantics as RESOLVE_IN_ROOT, one component at a time, so that missing
// directories can be created on the way (and for kernels without openat2). Every
// step is an *at call with O_NOFOLLOW relative to a directory we already hold;
// symlinks are expanded by hand, absolute ones restarting at the root.
UniqueFd walk_in_root(int root_fd, const Components& path, size_t count, bool create, const Owner* owner) {
  std::deque<std::string> todo(path.begin(), path.begin() + static_cast<std::ptrdiff_t>(count));
  UniqueFd cur = dup_fd(root_fd);
  std::vector<std::string> names;  // real directories from the root to cur; ".." at none stays at the root
  int links = 0;
  while (!todo.empty()) {
    std::string c = std::move(todo.front());
    todo.pop_front();
    if (c.empty() || c == ".") continue;
    if (c == "..") {
      if (!names.empty()) {
        names.pop_back();
        cur = reopen_from_root(root_fd, names);
      }
      continue;
    }
    struct stat st;
    if (::fstatat(cur.get(), c.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno != ENOENT) throw_errno(ErrorKind::Image, "stat " + c);
      if (!create) return UniqueFd();
      if (::mkdirat(cur.get(), c.c_str(), 0755) == 0) {
        if (owner && ::fchownat(cur.get(), c.c_str(), owner->uid, owner->gid, AT_SYMLINK_NOFOLLOW) != 0) {
          throw_errno(ErrorKind::Image, "chown " + c);
        }
      } else if (errno != EEXIST) {
        throw_errno(ErrorKind::Image, "mkdir " + c);
      }
      todo.push_front(std::move(c));  // look again: now a directory
      continue;
    }
    if (S_ISLNK(st.st_mode)) {
      if (++links > kMaxSymlinks) throw Error(ErrorKind::Image, "too many levels of symbolic links at '" + c + "'");
      std::string target = read_link_at(cur.get(), c);
      if (target.starts_with('/')) {
        cur = dup_fd(root_fd);
        names.clear();
      }
      auto parts = split(target, '/');
      todo.insert(todo.begin(), parts.begin(), parts.end());
      continue;
    }
    if (!S_ISDIR(st.st_mode)) throw Error(ErrorKind::Image, "'" + c + "' is not a directory");
    UniqueFd next(::openat(cur.get(), c.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!next) throw_errno(ErrorKind::Image, "open directory " + c);
    cur = std::move(next);
    names.push_back(std::move(c));
  }
  return cur;
}

void remove_at_depth(int dir_fd, const std::string& name, int depth) {
  struct stat st;
  if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return;
    throw_errno(ErrorKind::Image, "stat " + name);
  }
  if (S_ISDIR(st.st_mode)) {
    if (depth >= kMaxRemoveDepth) {
      throw Error(ErrorKind::Image,
                  "directory tree deeper than " + std::to_string(kMaxRemoveDepth) + " levels at '" + name + "'");
    }
    UniqueFd sub(::openat(dir_fd, name.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!sub) throw_errno(ErrorKind::Image, "open directory " + name);
    for (const auto& child : list_dir(sub.get())) remove_at_depth(sub.get(), child, depth + 1);
    if (::unlinkat(dir_fd, name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT)
      throw_errno(ErrorKind::Image, "rmdir " + name);
    return;
  }
  if (::unlinkat(dir_fd, name.c_str(), 0) != 0 && errno != ENOENT) throw_errno(ErrorKind::Image, "unlink " + name);
}

struct DirCloser {
  void operator()(DIR* d) const { ::closedir(d); }
};

}  // namespace

Components clean_path(std::string_view path) {
  Components out;
  for (auto& part : split(path, '/')) {
    if (part.empty() || part == ".") continue;
    if (part == "..") {
      if (!out.empty()) out.pop_back();
      continue;
    }
    out.push_back(std::move(part));
  }
  return out;
}

std::string join_path(const Components& c, size_t count) {
  std::string out;
  for (size_t i = 0; i < count && i < c.size(); ++i) {
    if (i) out += '/';
    out += c[i];
  }
  return out;
}

UniqueFd open_dir_in_root(int root_fd, const Components& path, size_t count, bool create, const Owner* owner) {
  if (count == 0) return dup_fd(root_fd);
  int fd = openat2_in_root(root_fd, join_path(path, count));
  if (fd >= 0) return UniqueFd(fd);
  // Missing directories, no openat2 (ENOSYS), a rename race (EAGAIN), not a
  // directory: the step-by-step walk creates what is missing or reports precisely.
  return walk_in_root(root_fd, path, count, create, owner);
}

void remove_at(int dir_fd, const std::string& name) { remove_at_depth(dir_fd, name, 0); }

std::vector<std::string> list_dir(int dir_fd) {
  int fd = ::openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw_errno(ErrorKind::Image, "open directory for listing");
  std::unique_ptr<DIR, DirCloser> d(::fdopendir(fd));
  if (!d) {
    ::close(fd);
    throw_errno(ErrorKind::Image, "fdopendir");
  }
  std::vector<std::string> names;
  for (;;) {
    errno = 0;
    dirent* e = ::readdir(d.get());
    if (!e) break;
    std::string_view n = e->d_name;
    if (n != "." && n != "..") names.emplace_back(n);
  }
  if (errno != 0) throw_errno(ErrorKind::Image, "readdir");
  return names;
}

UniqueFd open_subdir(int dir_fd, const std::string& name) {
  return UniqueFd(::openat(dir_fd, name.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
}

}  // namespace boxlite::image::detail

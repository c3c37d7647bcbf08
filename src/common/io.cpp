#include "common/io.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <memory>
#include <system_error>
#include <thread>
#include <vector>

#include "common/thread.hpp"

namespace boxlite {

namespace {

std::string read_all_of(int fd, const std::string& path) {
  std::string out;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_errno(ErrorKind::Storage, "read " + path);
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

}  // namespace

std::string read_file(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) throw_errno(errno == ENOENT ? ErrorKind::NotFound : ErrorKind::Storage, "open " + path);
  return read_all_of(fd.get(), path);
}

std::optional<std::string> read_file_if_present(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd && errno == ENOENT) return std::nullopt;
  if (!fd) throw_errno(ErrorKind::Storage, "open " + path);
  return read_all_of(fd.get(), path);
}

void write_file_atomic(const std::string& path, std::string_view data, mode_t mode, bool durable) {
  // A name of its own: two processes may write the same file at once.
  std::string tmp = path + ".tmp." + random_hex(6);
  UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode));
  if (!fd) throw_errno(ErrorKind::Storage, "create " + tmp);
  try {
    write_all(fd.get(), data.data(), data.size());
    if (durable && ::fsync(fd.get()) != 0) throw_errno(ErrorKind::Storage, "fsync " + tmp);
    fd.reset();
    if (::rename(tmp.c_str(), path.c_str()) != 0) throw_errno(ErrorKind::Storage, "rename " + tmp + " to " + path);
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
}

void send_all(int fd, const void* data, size_t len) {
  const char* p = static_cast<const char*>(data);
  while (len > 0) {
    ssize_t n = ::send(fd, p, len, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_errno(ErrorKind::Internal, "send on socket fd " + std::to_string(fd));
    }
    p += n;
    len -= static_cast<size_t>(n);
  }
}

void write_all(int fd, const void* data, size_t len) {
  const char* p = static_cast<const char*>(data);
  while (len > 0) {
    ssize_t n = ::write(fd, p, len);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_errno(ErrorKind::Internal, "write fd " + std::to_string(fd));
    }
    p += n;
    len -= static_cast<size_t>(n);
  }
}

std::string read_up_to(int fd, size_t max, const std::string& what, ErrorKind code) {
  std::string data(max, '\0');
  size_t got = 0;
  while (got < max) {
    ssize_t n = ::read(fd, data.data() + got, max - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw_errno(code, "read " + what);
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  data.resize(got);
  return data;
}

bool read_exact(int fd, void* data, size_t len) {
  char* p = static_cast<char*>(data);
  size_t got = 0;
  while (got < len) {
    ssize_t n = ::read(fd, p + got, len - got);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_errno(ErrorKind::Internal, "read fd " + std::to_string(fd));
    }
    if (n == 0) {
      if (got == 0) return false;
      throw Error(ErrorKind::Internal, "unexpected end of stream on fd " + std::to_string(fd));
    }
    got += static_cast<size_t>(n);
  }
  return true;
}

bool close_descriptors_from(int first) noexcept {
  if (::syscall(SYS_close_range, first, ~0U, 0) == 0) return true;
  int dir = static_cast<int>(::syscall(SYS_openat, AT_FDCWD, "/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir >= 0) {
    // getdents64 rather than opendir: no allocation. Closing while listing is safe
    // here: an entry closed is one already read.
    alignas(8) char buf[4096];
    long n;
    while ((n = ::syscall(SYS_getdents64, dir, buf, sizeof buf)) > 0) {
      for (long off = 0; off < n;) {
        const auto* e = reinterpret_cast<const dirent64*>(buf + off);
        off += e->d_reclen;
        int fd = 0;
        const char* c = e->d_name;
        for (; *c >= '0' && *c <= '9'; ++c) fd = fd * 10 + (*c - '0');
        if (*c == '\0' && c != e->d_name && fd >= first && fd != dir) ::syscall(SYS_close, fd);
      }
    }
    ::syscall(SYS_close, dir);
    if (n == 0) return true;
  }
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0) return false;
  for (rlim_t fd = static_cast<rlim_t>(first); fd < lim.rlim_cur; ++fd) ::syscall(SYS_close, static_cast<int>(fd));
  return true;
}

void set_nonblocking(int fd, bool on) {
  int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0) throw_errno(ErrorKind::Internal, "fcntl F_GETFL");
  flags = on ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK);
  if (::fcntl(fd, F_SETFL, flags) < 0) throw_errno(ErrorKind::Internal, "fcntl F_SETFL");
}

void set_cloexec(int fd, bool on) {
  int flags = ::fcntl(fd, F_GETFD);
  if (flags < 0) throw_errno(ErrorKind::Internal, "fcntl F_GETFD");
  flags = on ? (flags | FD_CLOEXEC) : (flags & ~FD_CLOEXEC);
  if (::fcntl(fd, F_SETFD, flags) < 0) throw_errno(ErrorKind::Internal, "fcntl F_SETFD");
}

void make_dirs(const std::string& path, mode_t mode) {
  std::string cur;
  for (const auto& part : split(path, '/')) {
    if (part.empty()) {
      if (cur.empty()) cur = "/";
      continue;
    }
    if (!cur.empty() && cur.back() != '/') cur += '/';
    cur += part;
    if (::mkdir(cur.c_str(), mode) != 0 && errno != EEXIST) throw_errno(ErrorKind::Storage, "mkdir " + cur);
  }
}

void spread_subdirectories(const std::string& path) noexcept {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) return;
  int flags = 0;  // the kernel reads and writes an int, whatever the ioctl's name says
  if (::ioctl(fd.get(), FS_IOC_GETFLAGS, &flags) != 0 || (flags & FS_TOPDIR_FL) != 0) return;
  flags |= FS_TOPDIR_FL;
  (void)::ioctl(fd.get(), FS_IOC_SETFLAGS, &flags);
}

namespace {

// A box can nest its directories deeper than PATH_MAX, and deeper than we have
// descriptors (mkdir and chdir by relative names): a walk that reaches this depth, or
// paths this long, moves the directory it found up to the top of the removal instead
// of descending into it, and the next pass goes on from there. So a pass holds at
// most kMaxWalkDepth descriptors and names no path longer than a few KiB.
constexpr size_t kMaxWalkDepth = 64;
constexpr size_t kMaxWalkPath = 2048;

// Which mount a file is on: the mount id where the kernel tells it (a bind mount of
// the same file system has the same device), else the device.
struct MountOf {
  uint64_t mnt_id = 0;
  dev_t dev{};
  bool operator==(const MountOf&) const = default;
};
bool mount_of(int dirfd, const char* name, MountOf& out, mode_t* mode = nullptr) {
  struct statx stx {};
  int flags = AT_SYMLINK_NOFOLLOW | (name[0] == '\0' ? AT_EMPTY_PATH : 0);
  if (::statx(dirfd, name, flags, STATX_TYPE | STATX_MNT_ID, &stx) != 0) return false;
  out.mnt_id = (stx.stx_mask & STATX_MNT_ID) ? stx.stx_mnt_id : 0;
  out.dev = makedev(stx.stx_dev_major, stx.stx_dev_minor);
  if (mode) *mode = stx.stx_mode;
  return true;
}

struct Walk {
  int top = -1;   // the directory being emptied
  MountOf mount;  // its mount: the walk never crosses into another
  bool crossed_mount = false;
  std::vector<std::vector<std::string>> dirs_by_depth;
  size_t moved_up = 0;
  size_t removed = 0;  // files unlinked this pass (directories: dirs_by_depth)
};

// Moves directory `name` of `dirfd` to the top of the walk. Under a random name: the
// top may hold the box's own files, and a box must not be able to take every name
// the walk would try.
bool move_to_top(int dirfd, const char* name, Walk& walk) {
  for (int attempt = 0; attempt < 64; ++attempt) {
    std::string to = ".boxlite-deep-" + random_hex(8);
    if (::renameat2(dirfd, name, walk.top, to.c_str(), RENAME_NOREPLACE) == 0) {
      ++walk.moved_up;
      return true;
    }
    if (errno == EINVAL) {  // no RENAME_NOREPLACE here (NFS): a name seen free
      struct stat st;
      if (::fstatat(walk.top, to.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 || errno != ENOENT) continue;
      if (::renameat(dirfd, name, walk.top, to.c_str()) != 0) return false;
      ++walk.moved_up;
      return true;
    }
    if (errno != EEXIST) return false;
  }
  return false;
}

// Unlinks everything but directories below `dirfd` (which this takes), and files
// the directories by depth. False on any error (the caller falls back), and on a
// directory of another file system (a mount point), which it never enters.
bool unlink_files_and_list_dirs(int dirfd, const std::string& path, size_t depth, Walk& walk) {
  DIR* d = ::fdopendir(dirfd);
  if (d == nullptr) {
    ::close(dirfd);
    return false;
  }
  std::unique_ptr<DIR, int (*)(DIR*)> dir(d, ::closedir);
  while (dirent* e = ::readdir(d)) {
    std::string_view name = e->d_name;
    if (name == "." || name == "..") continue;
    MountOf mount;
    mode_t mode = 0;
    bool is_dir = e->d_type == DT_DIR;
    if (e->d_type == DT_UNKNOWN || is_dir) {
      if (!mount_of(::dirfd(d), e->d_name, mount, &mode)) return false;
      is_dir = S_ISDIR(mode);
    }
    if (!is_dir) {
      if (::unlinkat(::dirfd(d), e->d_name, 0) != 0) return false;
      ++walk.removed;
      continue;
    }
    if (!(mount == walk.mount)) {
      walk.crossed_mount = true;
      return false;
    }
    // Allocated before the descriptor is opened: a std::bad_alloc leaks none.
    std::string child_path = path + "/" + e->d_name;
    // Never from the top itself: a move there would go nowhere, pass after pass.
    if (depth > 0 && (depth + 1 >= kMaxWalkDepth || child_path.size() >= kMaxWalkPath)) {
      if (!move_to_top(::dirfd(d), e->d_name, walk)) return false;
      continue;
    }
    if (walk.dirs_by_depth.size() <= depth) walk.dirs_by_depth.resize(depth + 1);
    walk.dirs_by_depth[depth].push_back(child_path);
    int child = ::openat(::dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (child < 0) return false;
    if (!unlink_files_and_list_dirs(child, child_path, depth + 1, walk)) return false;
  }
  return true;
}

// rmdir of every path, on up to 8 threads: on file systems that discard a freed
// block synchronously (ext4 -o discard, common on cloud disks) each rmdir waits
// for the device, ~4 ms here, and a box's tree holds a dozen directories.
bool remove_dirs_in_parallel(const std::vector<std::string>& dirs) {
  std::atomic<size_t> next{0};
  std::atomic<bool> ok{true};
  auto work = [&] {
    for (size_t i; (i = next++) < dirs.size();) {
      // ENOENT: listed twice (a directory moved into the top during its listing).
      if (::rmdir(dirs[i].c_str()) != 0 && errno != ENOENT) ok = false;
    }
  };
  size_t n = std::min<size_t>(dirs.size(), 8);
  std::vector<std::jthread> threads;  // joined however this returns
  try {
    threads.reserve(n);
    for (size_t i = 1; i < n; ++i) threads.push_back(start_thread_without_signals<std::jthread>(work));
  } catch (const std::exception&) {
    // No more threads (or no memory for them): this one does the rest.
  }
  work();
  threads.clear();
  return ok;
}

// Everything below `path`: deepest directories first, the directories of one depth
// in parallel; what a pass moved up to the top (Walk), in the passes after. False
// (with some of it left) on any error; `crossed_mount` says when that was a mount
// point below `path`.
bool remove_contents_by_levels(const std::string& path, bool& crossed_mount) {
  crossed_mount = false;
  // Not a directory, or a symlink to one: the open fails (ENOTDIR, ELOOP).
  UniqueFd top(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  Walk walk;
  if (!top || !mount_of(top.get(), "", walk.mount)) return false;
  walk.top = top.get();
  do {
    walk.moved_up = walk.removed = 0;
    walk.dirs_by_depth.clear();
    // The walk's own (it closes it), reading from the start: not a dup, whose offset
    // would be where the last pass's listing ended.
    int fd = ::openat(top.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    bool ok = fd >= 0 && unlink_files_and_list_dirs(fd, path, 0, walk);
    crossed_mount = walk.crossed_mount;
    if (!ok) return false;
    size_t dirs = 0;
    for (auto level = walk.dirs_by_depth.rbegin(); level != walk.dirs_by_depth.rend(); ++level) {
      if (!remove_dirs_in_parallel(*level)) return false;
      dirs += level->size();
    }
    // A pass that only moved things around (something adding to the tree as fast as
    // it goes) would never end.
    if (walk.moved_up > 0 && dirs == 0 && walk.removed == 0) return false;
  } while (walk.moved_up > 0);
  return true;
}

}  // namespace

void remove_tree(const std::string& path) {
  bool crossed_mount = false;
  if (remove_contents_by_levels(path, crossed_mount) && ::rmdir(path.c_str()) == 0) return;
  if (crossed_mount) {
    throw Error(ErrorKind::Storage, "remove " + path + ": a file system is mounted below it; unmount it first");
  }
  // Whatever that could not do (not a directory, a race): the plain recursive
  // removal, which reports what failed.
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
  if (ec) throw Error(ErrorKind::Storage, "remove " + path + ": " + ec.message());
}

bool empty_directory(const std::string& path) noexcept {
  try {
    bool crossed_mount = false;
    return remove_contents_by_levels(path, crossed_mount);
  } catch (const std::exception&) {  // std::bad_alloc: whatever is left stays
    return false;
  }
}

bool path_exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    size_t pos = s.find(sep, start);
    out.emplace_back(s.substr(start, pos == std::string_view::npos ? std::string_view::npos : pos - start));
    if (pos == std::string_view::npos) break;
    start = pos + 1;
  }
  return out;
}

std::string trim(std::string_view s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return {};
  size_t e = s.find_last_not_of(" \t\r\n");
  return std::string(s.substr(b, e - b + 1));
}

ssize_t send_with_fds(int sock, const void* data, size_t len, const int* fds, size_t nfds) noexcept {
  if (nfds > kMaxPassedFds) {
    errno = EINVAL;
    return -1;
  }
  iovec iov{const_cast<void*>(data), len};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxPassedFds)] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  if (nfds > 0) {
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
    std::memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
  }
  ssize_t n;
  while ((n = ::sendmsg(sock, &msg, MSG_NOSIGNAL)) < 0 && errno == EINTR) {
  }
  return n;
}

ssize_t recv_with_fds(int sock, void* data, size_t len, int* fds, size_t max_fds, size_t* nfds) noexcept {
  *nfds = 0;
  iovec iov{data, len};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxPassedFds)];
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n;
  while ((n = ::recvmsg(sock, &msg, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR) {
  }
  if (n < 0) return n;
  bool cut = (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      if (*nfds < max_fds) {
        fds[(*nfds)++] = fd;
      } else {
        ::close(fd);
        cut = true;
      }
    }
  }
  if (cut) {
    for (size_t i = 0; i < *nfds; ++i) ::close(fds[i]);
    *nfds = 0;
    errno = EMSGSIZE;
    return -1;
  }
  return n;
}

// False when `path` does not fit sun_path.
static bool fill_unix_address(const std::string& path, sockaddr_un& addr) {
  addr = sockaddr_un{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) return false;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  return true;
}

static sockaddr_un unix_address(const std::string& path) {
  sockaddr_un addr{};
  if (!fill_unix_address(path, addr)) {
    throw Error(ErrorKind::Config, "unix socket path is " + std::to_string(path.size()) + " bytes, over the limit of " +
                                       std::to_string(sizeof(addr.sun_path) - 1) + ": " + path +
                                       " (use a shorter BOXLITE_HOME)");
  }
  return addr;
}

UniqueFd unix_listen(const std::string& path, int backlog) {
  sockaddr_un addr = unix_address(path);
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) throw_errno(ErrorKind::Internal, "socket");
  ::unlink(path.c_str());
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
    throw_errno(ErrorKind::Internal, "bind " + path);
  if (::listen(fd.get(), backlog) != 0) throw_errno(ErrorKind::Internal, "listen " + path);
  return fd;
}

UniqueFd unix_connect(const std::string& path) {
  sockaddr_un addr = unix_address(path);
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) throw_errno(ErrorKind::Internal, "socket");
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    throw_errno(ErrorKind::RpcTransport, "connect " + path);
  }
  return fd;
}

pid_t unix_listener_pid(const std::string& path) {
  sockaddr_un addr;
  if (!fill_unix_address(path, addr)) return 0;
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd || ::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return 0;
  ucred cred{};
  socklen_t len = sizeof cred;
  if (::getsockopt(fd.get(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return 0;
  return cred.pid;
}

std::string hex_encode(const unsigned char* data, size_t len) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  out.reserve(len * 2);
  for (size_t i = 0; i < len; ++i) {
    out += digits[data[i] >> 4];
    out += digits[data[i] & 15];
  }
  return out;
}

std::string random_hex(size_t bytes) {
  std::string buf(bytes, '\0');
  size_t got = 0;
  while (got < bytes) {
    ssize_t n = ::getrandom(buf.data() + got, bytes - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_errno(ErrorKind::Internal, "getrandom");
    }
    got += static_cast<size_t>(n);
  }
  return hex_encode(reinterpret_cast<const unsigned char*>(buf.data()), bytes);
}

int64_t wall_clock_ms() {
  timespec ts;
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

void set_send_buffer(int fd, int bytes) {
  if (::setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &bytes, sizeof bytes) != 0) {
    ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
  }
}

double now_ms() {
  timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) * 1000.0 + static_cast<double>(ts.tv_nsec) / 1e6;
}

namespace {
thread_local uint64_t du_total = 0;
int du_add(const char*, const struct stat* st, int, struct FTW*) {
  du_total += static_cast<uint64_t>(st->st_blocks) * 512;
  return 0;
}
}  // namespace

uint64_t disk_usage(const std::string& path) {
  du_total = 0;
  ::nftw(path.c_str(), du_add, 32, FTW_PHYS | FTW_MOUNT);
  return du_total;
}

}  // namespace boxlite

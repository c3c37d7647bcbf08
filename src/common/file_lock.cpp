#include "common/file_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>

#include "common/error.hpp"

namespace boxlite {

namespace {

// Where a directory cannot be flocked, the lock file in it that stands for it.
constexpr const char* kDirectoryLockFallback = ".lock";

UniqueFd open_lock_file(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  if (!fd) throw_errno(ErrorKind::Storage, "open lock file " + path);
  return fd;
}

// flock, again after a signal: 0 or the errno.
int flock_retrying(int fd, FileLock::Mode mode, bool wait) {
  int op = (mode == FileLock::Mode::Exclusive ? LOCK_EX : LOCK_SH) | (wait ? 0 : LOCK_NB);
  while (::flock(fd, op) != 0) {
    if (errno != EINTR) return errno;
  }
  return 0;
}

}  // namespace

FileLock FileLock::lock(UniqueFd fd, const std::string& path, Mode mode, bool wait) {
  if (int err = flock_retrying(fd.get(), mode, wait); err != 0) {
    if (!wait && err == EWOULDBLOCK) return FileLock{};
    throw_errno(ErrorKind::Storage, "lock " + path, err);
  }
  FileLock l;
  l.fd_ = std::move(fd);
  return l;
}

namespace {

// Whether `fd`, just locked, is still the directory at `dir`. A removed box's
// directory can be kept as a spare and become another box's (core/spare_dirs.hpp):
// a process that waited for its lock meanwhile would otherwise hold that box's. A
// directory removed outright (no links left) still counts, as before there were
// spares: its waiters hold the lock of nothing.
bool still_at_path(int fd, const std::string& dir) {
  struct stat held {};
  struct stat now {};
  if (::fstat(fd, &held) != 0 || held.st_nlink == 0) return true;
  if (::stat(dir.c_str(), &now) != 0) return false;
  return held.st_dev == now.st_dev && held.st_ino == now.st_ino;
}

}  // namespace

FileLock FileLock::lock_directory(const std::string& dir, Mode mode, bool wait) {
  for (int attempt = 0;; ++attempt) {
    UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!fd) throw_errno(ErrorKind::Storage, "open directory to lock " + dir);
    int err = flock_retrying(fd.get(), mode, wait);
    // Moved away while we waited: the directory there now, or none (the error of a
    // removal we came after).
    if (err == 0 && !still_at_path(fd.get(), dir)) {
      if (attempt < 100) continue;
      throw Error(ErrorKind::Storage, "lock " + dir + ": the directory keeps being replaced");
    }
    return locked_directory(std::move(fd), dir, mode, wait, err);
  }
}

FileLock FileLock::locked_directory(UniqueFd fd, const std::string& dir, Mode mode, bool wait, int err) {
  // NFS and CIFS emulate flock with byte-range locks, which want a file opened for
  // writing (EBADF on a directory): there a lock file inside it. Every process fails
  // the same way on one file system, so all of them take the same lock.
  if (err == EBADF || err == ENOLCK || err == EINVAL) {
    std::string file = dir + "/" + kDirectoryLockFallback;
    return lock(open_lock_file(file), file, mode, wait);
  }
  if (err == 0) {
    FileLock l;
    l.fd_ = std::move(fd);
    return l;
  }
  if (!wait && err == EWOULDBLOCK) return FileLock{};
  throw_errno(ErrorKind::Storage, "lock " + dir, err);
}

bool FileLock::removed() const {
  struct stat st {};
  return fd_.valid() && ::fstat(fd_.get(), &st) == 0 && st.st_nlink == 0;
}

FileLock FileLock::acquire(const std::string& path, Mode mode) { return lock(open_lock_file(path), path, mode, true); }
FileLock FileLock::try_acquire(const std::string& path, Mode mode) {
  return lock(open_lock_file(path), path, mode, false);
}
FileLock FileLock::acquire_directory(const std::string& dir, Mode mode) { return lock_directory(dir, mode, true); }
FileLock FileLock::try_acquire_directory(const std::string& dir, Mode mode) { return lock_directory(dir, mode, false); }

}  // namespace boxlite

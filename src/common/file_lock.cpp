#include "common/file_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>

#include "common/error.hpp"

namespace boxlite {

namespace {

UniqueFd open_lock_file(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  if (!fd) throw_errno(ErrorCode::Storage, "open lock file " + path);
  return fd;
}

UniqueFd open_lock_directory(const std::string& dir) {
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) throw_errno(ErrorCode::Storage, "open directory to lock " + dir);
  return fd;
}

}  // namespace

FileLock FileLock::lock(UniqueFd fd, const std::string& path, Mode mode, bool wait) {
  int op = (mode == Mode::Exclusive ? LOCK_EX : LOCK_SH) | (wait ? 0 : LOCK_NB);
  while (::flock(fd.get(), op) != 0) {
    if (errno == EINTR) continue;
    if (!wait && errno == EWOULDBLOCK) return FileLock{};
    throw_errno(ErrorCode::Storage, "lock " + path);
  }
  FileLock l;
  l.fd_ = std::move(fd);
  return l;
}

FileLock FileLock::acquire(const std::string& path, Mode mode) { return lock(open_lock_file(path), path, mode, true); }
FileLock FileLock::try_acquire(const std::string& path, Mode mode) {
  return lock(open_lock_file(path), path, mode, false);
}
FileLock FileLock::lock_directory(const std::string& dir, Mode mode, bool wait) {
  UniqueFd fd = open_lock_directory(dir);
  // NFS and CIFS emulate flock with byte-range locks, which want a file opened for
  // writing (EBADF on a directory): there, and on any file system without flock on
  // directories, a lock file inside it. Every process fails the same way on one
  // file system, so all of them take the same lock.
  if (::flock(fd.get(), LOCK_SH | LOCK_NB) != 0 && (errno == EBADF || errno == ENOLCK || errno == EINVAL)) {
    std::string file = dir + "/" + kDirectoryLockFallback;
    return lock(open_lock_file(file), file, mode, wait);
  }
  ::flock(fd.get(), LOCK_UN);
  return lock(std::move(fd), dir, mode, wait);
}

FileLock FileLock::acquire_directory(const std::string& dir, Mode mode) { return lock_directory(dir, mode, true); }
FileLock FileLock::try_acquire_directory(const std::string& dir, Mode mode) { return lock_directory(dir, mode, false); }

}  // namespace boxlite

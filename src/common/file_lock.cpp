#include "common/file_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>

#include "common/error.hpp"

namespace boxlite {

FileLock FileLock::lock(const std::string& path, Mode mode, bool wait) {
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  if (!fd) throw_errno(ErrorCode::Storage, "open lock file " + path);
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

FileLock FileLock::acquire(const std::string& path, Mode mode) { return lock(path, mode, true); }
FileLock FileLock::try_acquire(const std::string& path, Mode mode) { return lock(path, mode, false); }

}  // namespace boxlite

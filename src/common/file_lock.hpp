// Advisory whole-file locks (flock) that other processes honour and that the
// kernel drops when the holder dies, so a crashed process never leaves one stale.
#pragma once

#include <string>

#include "common/fd.hpp"

namespace boxlite {

class FileLock {
 public:
  enum class Mode { Shared, Exclusive };
  FileLock() = default;
  // Blocks until the lock is held. Throws Error(Storage) naming the path on failure.
  static FileLock acquire(const std::string& path, Mode mode = Mode::Exclusive);
  // Returns an unheld lock (held() == false) when another holder has it.
  static FileLock try_acquire(const std::string& path, Mode mode = Mode::Exclusive);
  // The same on a directory itself (flock locks any open file), which then needs no
  // lock file inside it: a file made costs a box ~0.1 ms on some hosts (docs/jail.md).
  // Where directories cannot be flocked (NFS, CIFS), on a `.lock` file in it. The
  // lock is of the directory at `dir` when it is taken: one moved away meanwhile (a
  // box directory kept as a spare) is let go, and the one there now locked instead,
  // or, with none there, the Storage error of a directory that is not there.
  static FileLock acquire_directory(const std::string& dir, Mode mode = Mode::Exclusive);
  static FileLock try_acquire_directory(const std::string& dir, Mode mode = Mode::Exclusive);
  bool held() const { return fd_.valid(); }
  // Whether what is locked was removed while the lock was waited for (its last link
  // gone): a directory locked after another process removed it.
  bool removed() const;
  void release() { fd_.reset(); }

 private:
  static FileLock lock(UniqueFd fd, const std::string& path, Mode mode, bool wait);
  static FileLock lock_directory(const std::string& dir, Mode mode, bool wait);
  // The lock of `fd` (`dir`), given flock's errno `err`.
  static FileLock locked_directory(UniqueFd fd, const std::string& dir, Mode mode, bool wait, int err);
  UniqueFd fd_;
};

}  // namespace boxlite

#include "shim/capped_log.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>

#include "common/error.hpp"
#include "common/io.hpp"

namespace boxlite::shim {
namespace {

UniqueFd open_log(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!fd) throw_errno(ErrorKind::Storage, "open " + path);
  return fd;
}

}  // namespace

LogPipe make_log_pipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw_errno(ErrorKind::Engine, "pipe for an engine log");
  // Room for a kernel's whole boot log while the shim is busy elsewhere.
  ::fcntl(fds[1], F_SETPIPE_SZ, 1 << 20);
  return {UniqueFd(fds[0]), UniqueFd(fds[1])};
}

CappedLog::CappedLog(UniqueFd pipe, std::string path, uint64_t max_bytes)
    : pipe_(std::move(pipe)), file_(open_log(path)), path_(std::move(path)), max_bytes_(max_bytes) {
  set_nonblocking(pipe_.get());
}

void CappedLog::drain() {
  char buf[65536];
  while (pipe_) {
    ssize_t n = ::read(pipe_.get(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN) pipe_.reset();
      return;
    }
    if (n == 0) {
      pipe_.reset();  // the engine closed it: it has exited
      return;
    }
    write_out(buf, static_cast<size_t>(n));
  }
}

void CappedLog::write_out(const char* data, size_t len) {
  if (written_ + len > max_bytes_ && written_ > 0) {
    std::string old = path_ + ".1";
    if (::rename(path_.c_str(), old.c_str()) == 0) {
      try {
        file_ = open_log(path_);
        written_ = 0;
      } catch (const Error& e) {
        std::fprintf(stderr, "boxlite-shim: %s\n", e.what());
        file_.reset();
      }
    }
  }
  if (!file_) return;  // nowhere to write: the output is dropped, the box goes on
  try {
    write_all(file_.get(), data, len);
    written_ += len;
  } catch (const Error& e) {
    // A full disk loses log lines, never the box.
    std::fprintf(stderr, "boxlite-shim: %s\n", e.what());
  }
}

}  // namespace boxlite::shim

// A log the guest can write to but never grow without bound: the shim drains a
// pipe (QEMU's serial console, QEMU's own messages) into a file, and past
// max_bytes moves it to PATH.1 (replacing the previous one) and starts afresh,
// so at most twice max_bytes stay on disk and the newest output is in PATH.
#pragma once

#include <cstdint>
#include <string>

#include "common/fd.hpp"

namespace boxlite::shim {

class CappedLog {
 public:
  CappedLog() = default;
  // Truncates PATH; `pipe` is the read end, made non-blocking here.
  CappedLog(UniqueFd pipe, std::string path, uint64_t max_bytes);
  int fd() const { return pipe_.get(); }
  bool open() const { return pipe_.valid(); }
  // Moves what the pipe holds now into the file. At EOF the pipe is closed.
  void drain();

 private:
  void write_out(const char* data, size_t len);
  UniqueFd pipe_, file_;
  std::string path_;
  uint64_t max_bytes_ = 0, written_ = 0;
};

// A pipe whose write end the engine gets as its stdout or stderr.
struct LogPipe {
  UniqueFd read, write;
};
LogPipe make_log_pipe();

}  // namespace boxlite::shim

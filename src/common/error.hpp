// boxlite::Error: the one error type of the host and guest code. It carries a
// code (the C API's BoxliteErrorCode values) and a message that says what was
// attempted on what, and why it failed.
#pragma once

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>

namespace boxlite {

enum class ErrorCode : int {
  Ok = 0,
  Internal = 1,
  NotFound = 2,
  AlreadyExists = 3,
  InvalidState = 4,
  InvalidArgument = 5,
  Config = 6,
  Storage = 7,
  Image = 8,
  Network = 9,
  Execution = 10,
  Stopped = 11,
  Engine = 12,
  Unsupported = 13,
  Database = 14,
  Portal = 15,
  Rpc = 16,
  RpcTransport = 17,
  Metadata = 18,
  UnsupportedEngine = 19,
  ResourceExhausted = 20,
  SessionReaped = 21,
};

std::string_view error_code_name(ErrorCode code);

// A code another process of ours reported (boxlite-pull's answer, copy_out's
// extraction): the code when it is one, else Internal.
inline ErrorCode error_code_from(int code) {
  bool known = code > 0 && code <= static_cast<int>(ErrorCode::SessionReaped);
  return known ? static_cast<ErrorCode>(code) : ErrorCode::Internal;
}

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ErrorCode code() const { return code_; }

 private:
  ErrorCode code_;
};

// "what: strerror(errno)"; call right after the failing syscall.
inline std::string errno_text(std::string_view what, int err = errno) {
  return std::string(what) + ": " + std::strerror(err);
}

[[noreturn]] inline void throw_errno(ErrorCode code, std::string_view what, int err = errno) {
  throw Error(code, errno_text(what, err));
}

}  // namespace boxlite

// What the host and guest code use besides the public error type
// (boxlite/error.hpp): errno messages, and the one encoding of an error that
// crosses a process boundary.
#pragma once

#include <cerrno>
#include <cstring>
#include <string>
#include <string_view>

#include "boxlite/error.hpp"

namespace boxlite {

// The one encoding of an error that crosses a process boundary (a guest's
// ErrorReply, the shim's ready report, copy_out's extraction child, boxlite-pull's
// answers): the kind by its name, "/" and the spawn failure's name when there is
// one, a newline, the message. Carriers with fields of their own (the protocol's
// ErrorReply, a JSON line) carry the same three parts as fields. Decoding never
// trusts the sender: an unknown kind or a malformed report is Internal, naming
// `sender`.
std::string encode_error(const Error& e);
Error decode_error(std::string_view report, std::string_view sender);
Error decode_error(std::string_view kind, std::string_view spawn, std::string message, std::string_view sender);

// "what: strerror(errno)"; call right after the failing syscall.
inline std::string errno_text(std::string_view what, int err = errno) {
  return std::string(what) + ": " + std::strerror(err);
}

[[noreturn]] inline void throw_errno(ErrorKind kind, std::string_view what, int err = errno) {
  throw Error(kind, errno_text(what, err));
}

}  // namespace boxlite

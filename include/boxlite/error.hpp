// boxlite::Error: the one error type of the whole system, host and guest. It
// carries a kind (ErrorKind: the one enumeration every front end maps from) and a
// message that says what was attempted on what, and why it failed.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace boxlite {

// Every way an operation of ours can fail. Each front end maps a kind through one
// table (error_kind_info): the C API's code, the REST envelope's code and HTTP
// status, the Python exception class. The first 21 values are the C API's
// BoxliteErrorCode numbers (include/boxlite.h); the rest are kinds the REST
// envelope distinguishes and the C API folds into one of those.
enum class ErrorKind : int {
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
  Unauthenticated = 22,
  PermissionDenied = 23,
  UpstreamUnavailable = 24,
  Timeout = 25,
};
inline constexpr int kErrorKindCount = 25;

// One row of the mapping table.
struct ErrorKindInfo {
  ErrorKind kind;
  std::string_view name;          // "NotFound": the kind on the wire between our processes, and in --debug
  int c_code;                     // the C API's BoxliteErrorCode
  std::string_view rest_code;     // the REST envelope's "code" ("not_found")
  std::string_view rest_type;     // the REST envelope's "type" ("NotFoundError")
  int http_status;                // the REST response's status
  std::string_view python_class;  // boxlite.errors class (upstream's hierarchy)
};

const ErrorKindInfo &error_kind_info(ErrorKind kind);
inline std::string_view error_kind_name(ErrorKind kind) { return error_kind_info(kind).name; }
// By name ("NotFound"); nullopt for a name that is not one.
std::optional<ErrorKind> error_kind_from_name(std::string_view name);
// The kind a REST "code" stands for (a REST client's decoding); nullopt for an unknown code.
std::optional<ErrorKind> error_kind_from_rest_code(std::string_view code);
// The kind of a C API code (1..21); nullopt for 0 or an unknown number.
std::optional<ErrorKind> error_kind_from_c_code(int code);

// Why a command could not start in the box (the guest's spawn), carried with an
// Execution error. Front ends map it, never the message: the CLI exits 127 for
// NotFound, 126 for the next three, 125 for Setup (as docker exec does).
enum class SpawnFailure : int {
  None = 0,
  NotFound = 1,       // no such file: in $PATH, at the path given, or a script's interpreter
  NotExecutable = 2,  // exists but cannot be executed (mode, a directory, no format)
  BadWorkingDir = 3,  // the working directory is missing or not a directory
  UnknownUser = 4,    // the user or group does not exist in the box
  Setup = 5,          // our own failure before the exec (fork, pipe, pty)
};
std::string_view spawn_failure_name(SpawnFailure f);
std::optional<SpawnFailure> spawn_failure_from_name(std::string_view name);
// The exit code a shell (and docker exec) gives a command that failed this way.
int spawn_failure_exit_code(SpawnFailure f);

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string &message, SpawnFailure spawn = SpawnFailure::None)
      : std::runtime_error(message), kind_(kind), spawn_(spawn) {}
  ErrorKind kind() const { return kind_; }
  // Set on an Execution error whose command could not start.
  SpawnFailure spawn_failure() const { return spawn_; }

 private:
  ErrorKind kind_;
  SpawnFailure spawn_;
};

// The same error with `context + ": "` before its message (its kind and detail kept).
Error with_context(const Error &e, std::string_view context);

}  // namespace boxlite

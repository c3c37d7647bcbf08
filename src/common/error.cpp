#include "common/error.hpp"

#include <array>

namespace boxlite {

namespace {

using K = ErrorKind;

// The one table every front end maps a kind through (docs/decisions.md, "Error
// kinds"). Kinds the C API has no code for take the nearest one; REST codes that
// several kinds share name the service the caller sees (the host-guest channel
// and the shim are the engine to a REST client). The Python class is upstream's
// for the C code (one class per code, python/boxlite/errors.py): Python sees an
// error through the C API, so a kind the C API folds raises its code's class.
constexpr std::array<ErrorKindInfo, kErrorKindCount> kTable{{
    {K::Internal, "Internal", 1, "internal", "InternalError", 500, "InternalError"},
    {K::NotFound, "NotFound", 2, "not_found", "NotFoundError", 404, "NotFoundError"},
    {K::AlreadyExists, "AlreadyExists", 3, "already_exists", "AlreadyExistsError", 409, "AlreadyExistsError"},
    {K::InvalidState, "InvalidState", 4, "invalid_state", "InvalidStateError", 409, "InvalidStateError"},
    {K::InvalidArgument, "InvalidArgument", 5, "invalid_argument", "InvalidArgumentError", 400, "InvalidArgumentError"},
    {K::Config, "Config", 6, "config_error", "ConfigError", 400, "ConfigError"},
    {K::Storage, "Storage", 7, "storage_error", "StorageError", 500, "StorageError"},
    {K::Image, "Image", 8, "image_pull_failed", "ImageError", 422, "ImageError"},
    {K::Network, "Network", 9, "network_unavailable", "NetworkError", 503, "NetworkError"},
    {K::Execution, "Execution", 10, "execution_failed", "ExecutionError", 500, "ExecutionError"},
    {K::Stopped, "Stopped", 11, "stopped", "StoppedError", 409, "StoppedError"},
    {K::Engine, "Engine", 12, "engine_unavailable", "EngineError", 503, "EngineError"},
    {K::Unsupported, "Unsupported", 13, "unsupported", "UnsupportedError", 501, "UnsupportedError"},
    {K::Database, "Database", 14, "database_error", "DatabaseError", 500, "DatabaseError"},
    {K::Portal, "Portal", 15, "engine_unavailable", "EngineError", 503, "PortalError"},
    {K::Rpc, "Rpc", 16, "internal", "InternalError", 500, "RpcError"},
    {K::RpcTransport, "RpcTransport", 17, "engine_unavailable", "EngineError", 503, "RpcTransportError"},
    {K::Metadata, "Metadata", 18, "metadata_error", "MetadataError", 500, "MetadataError"},
    {K::UnsupportedEngine, "UnsupportedEngine", 19, "engine_unavailable", "EngineError", 503, "UnsupportedEngineError"},
    {K::ResourceExhausted, "ResourceExhausted", 20, "resource_exhausted", "ResourceExhaustedError", 429,
     "ResourceExhaustedError"},
    {K::SessionReaped, "SessionReaped", 21, "session_reaped", "SessionReapedError", 410, "SessionReapedError"},
    {K::Unauthenticated, "Unauthenticated", 6, "unauthenticated", "AuthError", 401, "ConfigError"},
    {K::PermissionDenied, "PermissionDenied", 6, "permission_denied", "AuthError", 403, "ConfigError"},
    {K::UpstreamUnavailable, "UpstreamUnavailable", 9, "upstream_unavailable", "UpstreamUnavailableError", 502,
     "NetworkError"},
    {K::Timeout, "Timeout", 12, "timeout", "TimeoutError", 504, "EngineError"},
}};

constexpr bool table_in_kind_order() {
  for (size_t i = 0; i < kTable.size(); ++i)
    if (static_cast<int>(kTable[i].kind) != static_cast<int>(i) + 1) return false;
  return true;
}
static_assert(table_in_kind_order(), "kTable must list every ErrorKind in order");

struct SpawnName {
  SpawnFailure f;
  std::string_view name;
  int exit_code;
};
constexpr std::array<SpawnName, 6> kSpawn{{
    {SpawnFailure::None, "None", 0},
    {SpawnFailure::NotFound, "NotFound", 127},
    {SpawnFailure::NotExecutable, "NotExecutable", 126},
    {SpawnFailure::BadWorkingDir, "BadWorkingDir", 126},
    {SpawnFailure::UnknownUser, "UnknownUser", 126},
    {SpawnFailure::Setup, "Setup", 125},
}};

}  // namespace

const ErrorKindInfo& error_kind_info(ErrorKind kind) {
  int i = static_cast<int>(kind) - 1;
  if (i < 0 || i >= kErrorKindCount) return kTable[0];  // not a kind: Internal
  return kTable[static_cast<size_t>(i)];
}

std::optional<ErrorKind> error_kind_from_name(std::string_view name) {
  for (const auto& row : kTable)
    if (row.name == name) return row.kind;
  return std::nullopt;
}

// A REST code several kinds share decodes to its first row: engine_unavailable
// to Engine, internal to Internal, config_error to Config, network_unavailable
// to Network.
std::optional<ErrorKind> error_kind_from_rest_code(std::string_view code) {
  for (const auto& row : kTable)
    if (row.rest_code == code) return row.kind;
  return std::nullopt;
}

std::optional<ErrorKind> error_kind_from_c_code(int code) {
  if (code < 1 || code > static_cast<int>(K::SessionReaped)) return std::nullopt;
  return static_cast<ErrorKind>(code);
}

std::string_view spawn_failure_name(SpawnFailure f) {
  for (const auto& s : kSpawn)
    if (s.f == f) return s.name;
  return "None";
}

std::optional<SpawnFailure> spawn_failure_from_name(std::string_view name) {
  for (const auto& s : kSpawn)
    if (s.name == name) return s.f;
  return std::nullopt;
}

int spawn_failure_exit_code(SpawnFailure f) {
  for (const auto& s : kSpawn)
    if (s.f == f) return s.exit_code;
  return 125;
}

std::string encode_error(const Error& e) {
  std::string head(error_kind_name(e.kind()));
  if (e.spawn_failure() != SpawnFailure::None) head += "/" + std::string(spawn_failure_name(e.spawn_failure()));
  return head + "\n" + e.what();
}

Error decode_error(std::string_view kind, std::string_view spawn, std::string message, std::string_view sender) {
  auto k = error_kind_from_name(kind);
  if (!k)
    return Error(K::Internal,
                 std::string(sender) + " reported an error of unknown kind '" + std::string(kind) + "': " + message);
  SpawnFailure f = SpawnFailure::None;
  if (!spawn.empty()) {
    auto parsed = spawn_failure_from_name(spawn);
    if (!parsed)
      return Error(K::Internal,
                   std::string(sender) + " reported an unknown spawn failure '" + std::string(spawn) + "': " + message);
    f = *parsed;
  }
  return Error(*k, message, f);
}

Error decode_error(std::string_view report, std::string_view sender) {
  size_t nl = report.find('\n');
  if (nl == std::string_view::npos)
    return Error(K::Internal, std::string(sender) + " sent a malformed error report: " + std::string(report));
  std::string_view head = report.substr(0, nl);
  size_t slash = head.find('/');
  std::string_view kind = head.substr(0, slash);
  std::string_view spawn = slash == std::string_view::npos ? std::string_view() : head.substr(slash + 1);
  return decode_error(kind, spawn, std::string(report.substr(nl + 1)), sender);
}

Error with_context(const Error& e, std::string_view context) {
  return Error(e.kind(), std::string(context) + ": " + e.what(), e.spawn_failure());
}

}  // namespace boxlite

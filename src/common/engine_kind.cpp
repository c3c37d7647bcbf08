#include "boxlite/engine_kind.hpp"

#include <string>

#include "common/error.hpp"

namespace boxlite {

std::string_view engine_kind_name(EngineKind kind) { return kind == EngineKind::Jail ? "jail" : "vm"; }

std::optional<EngineKind> engine_kind_from_name(std::string_view name) {
  if (name == "vm") return EngineKind::Vm;
  if (name == "jail") return EngineKind::Jail;
  return std::nullopt;
}

EngineKind parse_engine_kind(std::string_view name, std::string_view where) {
  if (auto k = engine_kind_from_name(name)) return *k;
  std::string msg = "unknown engine '" + std::string(name) + "': expected 'vm' or 'jail'";
  throw Error(ErrorKind::InvalidArgument, where.empty() ? msg : std::string(where) + ": " + msg);
}

}  // namespace boxlite

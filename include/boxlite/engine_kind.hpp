// EngineKind: which engine runs a box. Parsed from and printed to text here only
// (options, the CLI's --engine, BOXLITE_ENGINE, the home's config.json, the
// store's rows, shim.json).
#pragma once

#include <optional>
#include <string_view>

namespace boxlite {

enum class EngineKind {
  Vm,    // a QEMU microVM with its own kernel (the default)
  Jail,  // namespaces, an overlay root and seccomp on the host's kernel
};

inline constexpr EngineKind kDefaultEngine = EngineKind::Vm;

// "vm" | "jail".
std::string_view engine_kind_name(EngineKind kind);
// nullopt for text that names no engine.
std::optional<EngineKind> engine_kind_from_name(std::string_view name);
// As engine_kind_from_name, throwing InvalidArgument "unknown engine 'x': expected
// 'vm' or 'jail'" (with `where`, e.g. "BOXLITE_ENGINE", before it when given).
EngineKind parse_engine_kind(std::string_view name, std::string_view where = {});

}  // namespace boxlite

// <home>/config.json: {"engine": "vm"|"jail", "accel": "auto"|"kvm"|"tcg",
// "image_registries": [...]}, as the runtime reads it (Runtime's constructor).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "boxlite/engine_kind.hpp"
#include "registry/config.hpp"

namespace boxlite::core {

struct HomeConfig {
  std::optional<EngineKind> engine;  // nullopt when the file does not say
  std::string accel;                 // "" when the file does not say
  // The file's registries; nullopt when it has none or they were not asked for.
  std::optional<std::vector<registry::ImageRegistry>> registries;
};

// Parses the file's text (`path` names it in errors) and checks its engine and
// accel as box options are checked. Registries given in code replace the file's,
// so with `read_registries` false they are neither read nor checked. Every
// problem is a Config error naming the file.
HomeConfig parse_home_config(const std::string& text, const std::string& path, bool read_registries);

}  // namespace boxlite::core

// The global flags that shape the runtime: --home, --registry, --config.
#include "cli/commands.hpp"
#include "registry/config.hpp"

namespace boxlite::cli {

RuntimeOptions runtime_options(const GlobalFlags& g) {
  RuntimeOptions o;
  o.home_dir = g.home;
  for (const auto& spec : g.registries) o.image_registries.push_back(registry::parse_registry_flag(spec));
  if (!g.config.empty()) {
    for (auto& r : registry::load_config_file(g.config)) o.image_registries.push_back(std::move(r));
  }
  return o;
}

}  // namespace boxlite::cli

// The global flags that shape the runtime: --home, --registry, --config.
#include "commands.hpp"

namespace boxlite::cli {

RuntimeOptions runtime_options(const GlobalFlags& g) {
  RuntimeOptions o;
  o.home_dir = g.home;
  for (const auto& spec : g.registries) o.image_registries.push_back(parse_image_registry_flag(spec));
  if (!g.config.empty()) {
    for (auto& r : load_image_registries(g.config)) o.image_registries.push_back(std::move(r));
  }
  return o;
}

}  // namespace boxlite::cli

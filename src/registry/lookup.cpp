// The network-free half of pulling (pull.hpp): which references a name stands for,
// which registry settings apply, and what the store already holds. Kept apart from
// pull.cpp so that programs which never download (the CLI, libboxlite: downloads run
// in boxlite-pull, pull_client.hpp) link none of the HTTP client.
#include "registry/pull.hpp"

namespace boxlite::registry {

std::vector<ImageRef> candidates(const std::string& text, const std::vector<ImageRegistry>& registries) {
  ImageRef ref = parse_reference(text);
  if (ref.qualified()) return {ref};
  std::vector<ImageRef> out;
  for (const auto& r : registries) {
    if (r.search) out.push_back(on_registry(ref, r.host));
  }
  if (out.empty()) out.push_back(on_registry(ref, kDefaultRegistry));
  return out;
}

ImageRegistry registry_for(const ImageRef& ref, const std::vector<ImageRegistry>& registries) {
  for (const auto& r : registries) {
    if (r.host == ref.registry || (ref.registry == kDefaultRegistry && r.host == "index.docker.io")) return r;
  }
  ImageRegistry r;
  r.host = ref.registry;
  return r;
}

std::optional<PullResult> find_cached(const ImageStore& store, const std::string& text,
                                      const std::vector<ImageRegistry>& registries) {
  for (const auto& c : candidates(text, registries)) {
    if (auto digest = store.lookup(c.str())) {
      PullResult r;
      r.reference = c.str();
      r.manifest_digest = *digest;
      return r;
    }
  }
  return std::nullopt;
}

}  // namespace boxlite::registry

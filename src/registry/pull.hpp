// Pulling an image into the ImageStore: resolve the reference against the
// configured registries, negotiate the manifest (OCI and Docker schema 2, image
// indexes and manifest lists, linux/amd64 chosen), download missing blobs in
// parallel (each sha256-verified, written atomically, retried with backoff), then
// tag the manifest with its normalized reference.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "registry/config.hpp"
#include "registry/reference.hpp"
#include "registry/store.hpp"

namespace boxlite::registry {

using LayerProgress = boxlite::LayerProgress;  // boxlite/images.hpp

struct PullOptions {
  std::vector<ImageRegistry> registries;
  // Called from download threads (serialize in the callback); may be empty.
  std::function<void(const LayerProgress&)> progress;
  // Called once the manifest is known, with every layer (cached or not).
  std::function<void(const std::string& reference, const std::vector<LayerProgress>&)> on_manifest;
  int parallel = 4;      // concurrent blob downloads
  int attempts = 4;      // per blob and per manifest request, for transient failures
  int backoff_ms = 250;  // doubled each retry
};

using PullResult = boxlite::PullResult;  // boxlite/images.hpp

// The normalized references to try for `text`, in order: itself when qualified;
// else each search=true registry's; else docker.io's.
std::vector<ImageRef> candidates(const std::string& text, const std::vector<ImageRegistry>& registries);

// Settings for `ref`'s registry: the configured entry with that host, or https
// defaults (docker.io is reached at registry-1.docker.io).
ImageRegistry registry_for(const ImageRef& ref, const std::vector<ImageRegistry>& registries);

// Pulls `text`: the first candidate that succeeds wins. Errors: InvalidArgument
// (bad reference), Config (bad registry), Image (not found, 401, verification;
// with every candidate's failure when several were tried), Network (unreachable).
PullResult pull(ImageStore& store, const std::string& text, const PullOptions& opts);

// The first candidate of `text` already complete in the store, without network.
std::optional<PullResult> find_cached(const ImageStore& store, const std::string& text,
                                      const std::vector<ImageRegistry>& registries);

}  // namespace boxlite::registry

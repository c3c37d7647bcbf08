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

struct LayerProgress {
  std::string digest;
  uint64_t size = 0;        // from the manifest
  uint64_t downloaded = 0;  // bytes received so far (of this attempt)
  bool cached = false;      // already in the store: nothing to download
  bool done = false;
  int attempt = 1;
};

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

struct PullResult {
  std::string reference;        // normalized, as tagged in the store
  std::string manifest_digest;  // the linux/amd64 image manifest
  size_t layers = 0, layers_cached = 0;
  uint64_t bytes_downloaded = 0;
};

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

// Image references as users write them ("alpine", "ghcr.io/org/app:v1",
// "127.0.0.1:5000/test/busybox@sha256:...") and their normalized form.
#pragma once

#include <string>

namespace boxlite::registry {

struct ImageRef {
  std::string registry;    // "docker.io", "127.0.0.1:5000"; "" when the user named none
  std::string repository;  // "library/alpine", "test/busybox"
  std::string tag;         // "latest" when neither tag nor digest was given
  std::string digest;      // "sha256:<hex>" or ""

  bool qualified() const { return !registry.empty(); }
  // What the registry's /v2/<name>/manifests/<reference> takes.
  std::string manifest_reference() const { return digest.empty() ? tag : digest; }
  // "registry/repository:tag", "registry/repository@digest" (both when both given).
  std::string str() const;
};

// Parses docker's reference grammar: [domain/]path[:tag][@sha256:hex]. The first
// component is a domain when it has a '.' or ':' or is "localhost". Names are
// lowercase; tags [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}; only sha256 digests.
// "index.docker.io" becomes "docker.io". Throws InvalidArgument naming the reference.
ImageRef parse_reference(const std::string& text);

// The reference on `registry_host`: a one-component Docker-style name gets the
// "library/" namespace on every registry (as the reference system does:
// "alpine" on ghcr.io is ghcr.io/library/alpine).
ImageRef on_registry(const ImageRef& ref, const std::string& registry_host);

// Unqualified names with no search registry resolve to Docker Hub.
inline constexpr const char* kDefaultRegistry = "docker.io";

// True for "sha256:" + 64 lowercase hex digits; the only digests we turn into paths.
bool is_sha256_digest(const std::string& d);

}  // namespace boxlite::registry

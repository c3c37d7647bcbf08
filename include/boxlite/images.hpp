// Images: where they come from (ImageRegistry), what a pull reports, and what the
// home's store holds. Pulls themselves are Runtime's (runtime.hpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace boxlite {

// The documented ImageRegistry (docs/registry.md).
struct ImageRegistry {
  std::string host;                               // host[:port], never a URL
  std::string transport = "https";                // "https" | "http"
  bool skip_verify = false;                       // https without certificate/hostname checks
  bool search = false;                            // tried for unqualified names, in list order
  std::optional<std::string> username, password;  // basic auth, both or neither
  std::optional<std::string> bearer_token;        // wins over username/password
};

// The documented checks, with the documented messages (Config errors):
//   "image registry host is required"
//   "image registry host must be host[:port], not a URL: <h>"
//   "unsupported registry transport: <t>"
//   "registry username and password must be provided together"
void validate_image_registry(const ImageRegistry &r);

// The CLI's `--registry HOST[,transport=http|https][,skip_verify][,search=false]`:
// a registry given on the command line takes part in short-name search unless
// told otherwise. Credentials only come from a config file (never argv, which
// other users can read in /proc).
ImageRegistry parse_image_registry_flag(const std::string &spec);

// `--config FILE`: a JSON object with "image_registries" (other runtime keys of
// <home>/config.json, "engine" and "accel", are accepted and ignored here).
std::vector<ImageRegistry> load_image_registries(const std::string &path);

// One layer of a pull, as it goes.
struct LayerProgress {
  std::string digest;
  uint64_t size = 0;        // from the manifest
  uint64_t downloaded = 0;  // bytes received so far (of this attempt)
  bool cached = false;      // already in the store: nothing to download
  bool done = false;
  int attempt = 1;
};

struct PullResult {
  std::string reference;        // normalized, as tagged in the store
  std::string manifest_digest;  // the linux/amd64 image manifest
  size_t layers = 0, layers_cached = 0;
  uint64_t bytes_downloaded = 0;
};

// An image the home's store holds.
struct ImageInfo {
  std::string reference;        // normalized, "docker.io/library/alpine:latest"
  std::string manifest_digest;  // image identity
  std::string media_type;
  uint64_t size = 0;               // manifest + config + layers, bytes
  int64_t created_ms = 0;          // when this reference was (last) pulled
  std::vector<std::string> blobs;  // config and layer digests
};

// A reference's parts, as `images` shows them: registry ("" when the user named
// none), repository ("library/alpine"), and its tag or digest.
struct ImageReferenceParts {
  std::string registry, repository, tag, digest;
};
// InvalidArgument for text that is not an image reference.
ImageReferenceParts parse_image_reference(const std::string &text);

}  // namespace boxlite

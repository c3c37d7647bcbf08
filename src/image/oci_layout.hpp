// Reading OCI image layout directories (the format `skopeo copy ... oci:DIR:TAG`
// and `umoci` write): index.json -> (nested indexes) -> manifest -> config + layers.
// Everything read here is treated as untrusted: digests are validated before they
// become paths, small JSON blobs are size-capped and their sha256 verified.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace boxlite::image {

struct ImageConfig {  // from the OCI image config's "config" object
  std::vector<std::string> env, entrypoint, cmd;
  std::string working_dir, user;
};

struct Layer {
  std::string digest;
  std::string media_type;
  std::string blob_path;
  uint64_t size = 0;
};

struct LocalImage {
  std::string layout_dir;       // absolute
  std::string tag;
  std::string manifest_digest;  // "sha256:<hex>" = image identity
  ImageConfig config;
  std::vector<Layer> layers;    // base first
};

// Accepts "oci:DIR", "oci:DIR:TAG", or a plain directory path.
// Like skopeo, "oci:" references split at the first ':' after the prefix, so a tag
// may itself contain ':' (e.g. "docker.io/library/busybox:latest").
struct LayoutRef {
  std::string dir;
  std::string tag;  // "" = the only manifest, or the one tagged "latest"
};
LayoutRef parse_layout_ref(const std::string& s);

// Reads oci-layout, index.json (following nested indexes, choosing linux/amd64 by
// platform), manifest and config; verifies the sha256 of every index, manifest and
// config blob. Layer blobs are checked for presence and size only (see verify_blob).
// Errors: boxlite::Error(ErrorCode::Image, ...) naming the path and what is wrong.
LocalImage open_oci_layout(const LayoutRef& ref);

// Streams the blob at `path` through sha256 and compares with `digest`
// ("sha256:<hex>"); throws an Image error on mismatch or unreadable blob.
void verify_blob(const std::string& path, const std::string& digest);

}  // namespace boxlite::image

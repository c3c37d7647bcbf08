// Reading OCI image layout directories (the format `skopeo copy ... oci:DIR:TAG`
// and `umoci` write): index.json -> (nested indexes) -> manifest -> config + layers.
// Everything read here is treated as untrusted: digests are validated before they
// become paths, small JSON blobs are size-capped and their sha256 verified.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/fd.hpp"

namespace boxlite::image {

struct ImageConfig {  // from the OCI image config's "config" object
  std::vector<std::string> env, entrypoint, cmd;
  std::string working_dir, user;
};

struct Layer {
  std::string digest;
  std::string media_type;
  std::string blob_path;  // for messages; open_layer_blob opens it
  uint64_t size = 0;
  std::string layout_dir;                     // the layout the blob is confined to
  std::shared_ptr<const UniqueFd> layout_fd;  // its directory, as opened when the manifest was read
};

struct LocalImage {
  std::string layout_dir;  // absolute
  std::string tag;
  std::string manifest_digest;  // "sha256:<hex>" = image identity
  ImageConfig config;
  std::vector<Layer> layers;  // base first
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
// Errors: boxlite::Error(ErrorKind::Image, ...) naming the path and what is wrong.
LocalImage open_oci_layout(const LayoutRef& ref);

// The layer's blob, opened read-only within its layout: a symlink on the way may
// not lead out of the layout (nor through /proc's magic links), and it must be a
// regular file of the size the manifest gave. A layout is untrusted input: a blob
// that is a symlink to /etc/shadow, a FIFO or /dev/zero is an Image error, not a
// file of the host read as root. `st` gets its fstat.
UniqueFd open_layer_blob(const Layer& layer, struct stat& st);

// Streams the layer's blob through sha256 and compares with its digest; throws an
// Image error on a mismatch (without the hash of what was read) or an unreadable
// blob.
void verify_blob(const Layer& layer);
// The same for a blob open_layer_blob opened, read from where `fd` stands.
void verify_open_blob(int fd, const Layer& layer);

}  // namespace boxlite::image

// The manifests a registry serves, parsed: what a body is (an image index or an
// image manifest, OCI or Docker schema 2), the linux/amd64 entry of an index, and
// an image manifest's config and layers. A registry is untrusted: every field is
// checked, and anything malformed is an Image error naming `where`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace boxlite::registry {

struct BlobDescriptor {
  std::string media_type, digest;
  uint64_t size = 0;
};

struct ImageManifest {
  BlobDescriptor config;
  std::vector<BlobDescriptor> layers;
};

bool is_index_media_type(const std::string& mt);
bool is_manifest_media_type(const std::string& mt);

// The media type of a manifest body: the body's own mediaType when it names an
// index or a manifest, else the Content-Type's, else guessed from its keys (an
// object with "manifests" is an index). Schema 1 manifests and invalid JSON are
// Image errors.
std::string manifest_media_type(const std::string& body, const std::string& content_type, const std::string& display);

// The digest of an index's linux/amd64 manifest; an Image error listing the
// platforms it has when there is none.
std::string amd64_manifest_digest(const std::string& index_body, const std::string& where);

// An image manifest's config and layers (layers of a tar media type only).
ImageManifest parse_image_manifest(const std::string& body, const std::string& where);

}  // namespace boxlite::registry

#include "registry/manifest.hpp"

#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "registry/reference.hpp"

namespace boxlite::registry {

namespace {

using nlohmann::json;

constexpr const char* kOciManifest = "application/vnd.oci.image.manifest.v1+json";
constexpr const char* kOciIndex = "application/vnd.oci.image.index.v1+json";
constexpr const char* kDockerManifest = "application/vnd.docker.distribution.manifest.v2+json";
constexpr const char* kDockerList = "application/vnd.docker.distribution.manifest.list.v2+json";

[[noreturn]] void image_error(const std::string& msg) { throw Error(ErrorKind::Image, msg); }

bool is_layer_type(const std::string& mt) {
  return mt.starts_with("application/vnd.oci.image.layer.") ||
         mt.starts_with("application/vnd.docker.image.rootfs.diff.tar") ||
         mt.starts_with("application/vnd.docker.image.rootfs.foreign.diff.tar");
}

// A string field of `j`, "" when absent; an Image error when it is not a string.
std::string string_field(const json& j, const char* key, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return {};
  if (!it->is_string()) image_error(std::string("field '") + key + "' in " + where + " is not a string");
  return it->get<std::string>();
}

json parse_body(const std::string& body, const std::string& where) {
  try {
    return json::parse(body);
  } catch (const json::exception& e) {
    image_error("invalid manifest for " + where + ": " + e.what());
  }
}

BlobDescriptor descriptor(const json& j, const std::string& where) {
  if (!j.is_object()) image_error("descriptor in " + where + " is not an object");
  BlobDescriptor d;
  d.media_type = string_field(j, "mediaType", where);
  d.digest = string_field(j, "digest", where);
  if (!is_sha256_digest(d.digest))
    image_error("descriptor in " + where + " has an invalid digest '" + d.digest.substr(0, 80) + "'");
  auto s = j.find("size");
  if (s == j.end() || !s->is_number_unsigned())
    image_error("descriptor " + d.digest + " in " + where + " has no valid size");
  d.size = s->get<uint64_t>();
  return d;
}

}  // namespace

bool is_index_media_type(const std::string& mt) { return mt == kOciIndex || mt == kDockerList; }
bool is_manifest_media_type(const std::string& mt) { return mt == kOciManifest || mt == kDockerManifest; }

std::string manifest_media_type(const std::string& body, const std::string& content_type, const std::string& display) {
  std::string mt = content_type.substr(0, content_type.find(';'));
  json j = parse_body(body, display);
  if (!j.is_object()) return mt;
  auto inner = j.find("mediaType");
  if (inner != j.end() && inner->is_string()) {
    std::string named = inner->get<std::string>();
    if (is_index_media_type(named) || is_manifest_media_type(named)) mt = named;
  }
  if (!is_index_media_type(mt) && !is_manifest_media_type(mt)) {
    auto version = j.find("schemaVersion");
    if (version != j.end() && version->is_number_integer() && version->get<int64_t>() == 1)
      image_error(display + " uses the Docker schema 1 manifest format, which is not supported");
    mt = j.contains("manifests") ? kOciIndex : kOciManifest;
  }
  return mt;
}

std::string amd64_manifest_digest(const std::string& index_body, const std::string& where) {
  json index = parse_body(index_body, where);
  if (!index.is_object() || !index.contains("manifests") || !index["manifests"].is_array())
    image_error(where + " has no manifests array");
  std::string seen;
  for (const auto& m : index["manifests"]) {
    BlobDescriptor d = descriptor(m, where);
    auto p = m.find("platform");
    std::string os, arch;
    if (p != m.end() && p->is_object()) {
      os = string_field(*p, "os", where);
      arch = string_field(*p, "architecture", where);
    }
    if (os == "linux" && arch == "amd64") return d.digest;
    seen += (seen.empty() ? "" : ", ") + (os.empty() && arch.empty() ? std::string("unknown") : os + "/" + arch);
  }
  image_error("no linux/amd64 image in " + where + " (available: " + (seen.empty() ? "none" : seen) + ")");
}

ImageManifest parse_image_manifest(const std::string& body, const std::string& where) {
  json manifest = parse_body(body, where);
  if (!manifest.is_object() || !manifest.contains("config")) image_error(where + " has no config");
  ImageManifest out;
  out.config = descriptor(manifest["config"], where);
  if (!manifest.contains("layers") || !manifest["layers"].is_array()) image_error(where + " has no layers array");
  for (const auto& l : manifest["layers"]) {
    BlobDescriptor d = descriptor(l, where);
    if (!is_layer_type(d.media_type))
      image_error("layer " + d.digest + " in " + where + " has unsupported media type '" + d.media_type + "'");
    out.layers.push_back(d);
  }
  return out;
}

}  // namespace boxlite::registry

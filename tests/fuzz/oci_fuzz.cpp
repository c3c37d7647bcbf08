// OCI image parsing: a layout directory as open_oci_layout reads it (oci-layout,
// index.json, nested indexes, the linux/amd64 manifest, its config, the layers'
// descriptors), and the same JSON as the registry client parses what a registry
// serves (registry/manifest.hpp). Both are fed hostile images.
//
// Input: parts separated by "\n=====\n": the oci-layout file, index.json, then the
// blobs 2, 3, ... A part may name a later part N by "$N" (its "sha256:..." digest)
// and "#N" (its size), so that a mutated manifest still points at its config.
// Checks: only Image errors; what is read is what the layout holds.
#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/io.hpp"
#include "common/sha256.hpp"
#include "fuzz/fuzz_support.hpp"
#include "image/oci_layout.hpp"
#include "registry/manifest.hpp"

namespace {

using namespace boxlite;

constexpr std::string_view kSeparator = "\n=====\n";

std::vector<std::string> split_parts(std::string_view input) {
  std::vector<std::string> parts;
  for (size_t pos = 0;;) {
    size_t end = input.find(kSeparator, pos);
    parts.emplace_back(input.substr(pos, end == std::string_view::npos ? std::string_view::npos : end - pos));
    if (end == std::string_view::npos) return parts;
    pos = end + kSeparator.size();
  }
}

// "$N" and "#N" of part N (N a digit, naming a later part), last part first.
void resolve_references(std::vector<std::string>& parts, std::vector<std::string>& digests) {
  digests.assign(parts.size(), "");
  for (size_t i = parts.size(); i-- > 0;) {
    std::string& p = parts[i];
    std::string out;
    for (size_t k = 0; k < p.size(); ++k) {
      size_t n = k + 1 < p.size() && p[k + 1] >= '0' && p[k + 1] <= '9' ? static_cast<size_t>(p[k + 1] - '0') : 0;
      if ((p[k] == '$' || p[k] == '#') && n > i && n < parts.size()) {
        out += p[k] == '$' ? digests[n] : std::to_string(parts[n].size());
        ++k;
      } else {
        out += p[k];
      }
    }
    p = std::move(out);
    digests[i] = sha256_of(p);
  }
}

void put(const std::string& path, std::string_view data) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f || std::fwrite(data.data(), 1, data.size(), f) != data.size()) fuzz::fail("write " + path);
  std::fclose(f);
}

void open_layout(const std::vector<std::string>& parts, const std::vector<std::string>& digests) {
  static const std::string dir = fuzz::make_scratch_dir("oci");
  remove_tree(dir + "/layout");
  make_dirs(dir + "/layout/blobs/sha256");
  put(dir + "/layout/oci-layout", parts[0]);
  if (parts.size() > 1) put(dir + "/layout/index.json", parts[1]);
  for (size_t i = 2; i < parts.size(); ++i) put(dir + "/layout/blobs/sha256/" + digests[i].substr(7), parts[i]);
  try {
    image::LocalImage img = image::open_oci_layout({dir + "/layout", ""});
    fuzz::check(img.manifest_digest.starts_with("sha256:"), "a manifest digest that is not one");
    for (const auto& l : img.layers) {
      struct stat st {};
      UniqueFd fd = image::open_layer_blob(l, st);
      fuzz::check(static_cast<uint64_t>(st.st_size) == l.size, "a layer of another size than read");
    }
  } catch (const Error& e) {
    fuzz::check_error(e, {ErrorKind::Image});
  }
}

// Each part as a registry's manifest body would be parsed.
void parse_as_registry(const std::string& body) {
  try {
    std::string mt = registry::manifest_media_type(body, "application/vnd.oci.image.manifest.v1+json", "the image");
    if (registry::is_index_media_type(mt)) {
      fuzz::check(registry::amd64_manifest_digest(body, "index").starts_with("sha256:"), "index digest");
    } else {
      registry::ImageManifest m = registry::parse_image_manifest(body, "manifest");
      fuzz::check(m.config.digest.size() == 71, "a config digest that is not a sha256 digest");
    }
  } catch (const Error& e) {
    fuzz::check_error(e, {ErrorKind::Image});
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> parts = split_parts(fuzz::as_text(data, size)), digests;
  if (parts.size() > 10) return 0;  // "$N" names parts 2..9
  resolve_references(parts, digests);
  open_layout(parts, digests);
  for (size_t i = 1; i < parts.size(); ++i) parse_as_registry(parts[i]);
  return 0;
}

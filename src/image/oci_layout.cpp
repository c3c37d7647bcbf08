#include "image/oci_layout.hpp"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "common/error.hpp"
#include "common/io.hpp"
#include "common/sha256.hpp"
#include "image/digest.hpp"
#include "image/unpack.hpp"

namespace boxlite::image {

namespace {

using nlohmann::json;

// Index, manifest and config blobs are small; the cap keeps a hostile layout from
// making us read a multi-GB "manifest" into memory (the OCI spec suggests 4 MiB).
constexpr off_t kMaxJsonBlob = 16 << 20;
// Index -> index -> manifest nesting we follow before calling it a loop.
constexpr int kMaxIndexDepth = 8;
constexpr const char* kRefNameKey = "org.opencontainers.image.ref.name";

[[noreturn]] void fail(const std::string& msg) { throw Error(ErrorKind::Image, msg); }

struct Descriptor {
  std::string media_type, digest, ref_name, os, arch;
  int64_t size = -1;  // -1 = not given
};

std::string platform_name(const Descriptor& d) {
  if (d.os.empty() && d.arch.empty()) return "unknown platform";
  return d.os + "/" + d.arch;
}

json parse_json(const std::string& text, const std::string& where) {
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    fail("invalid JSON in " + where + ": " + e.what());
  }
}

// A layout being read: its path (for messages) and its directory, opened once, so
// that every file of it is read from the same directory even if the path is
// swapped for a symlink to another layout meanwhile.
struct Layout {
  std::string dir;
  std::shared_ptr<const UniqueFd> fd;
};

// `rel` in the layout `dir`, read-only, never through a symlink that leads out of it
// or a magic link, and only if it is a regular file (not a FIFO that would block,
// nor a device). openat2's RESOLVE_BENEATH does the walk; kernels before 5.6 refuse
// every symlink instead.
// `missing`: the message when it is not there ("missing WHAT in DIR" by default).
UniqueFd open_in_layout(const Layout& layout, const std::string& rel, const std::string& what, struct stat& st,
                        const std::string& missing = "") {
  const std::string& dir = layout.dir;
  int root = layout.fd->get();
  open_how how{};
  how.flags = O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
  UniqueFd fd;
  for (int attempt = 0; attempt < 8; ++attempt) {
    fd = UniqueFd(static_cast<int>(::syscall(SYS_openat2, root, rel.c_str(), &how, sizeof how)));
    if (fd || errno != EAGAIN) break;
  }
  // No openat2 (before 5.6), or a seccomp profile that refuses it (EPERM): each
  // component opened O_NOFOLLOW, so that any symlink is refused.
  bool walked = false;
  if (!fd && (errno == ENOSYS || errno == EPERM)) {
    walked = true;
    fd = UniqueFd(::fcntl(root, F_DUPFD_CLOEXEC, 0));
    for (const auto& part : split(rel, '/')) {
      fd = UniqueFd(::openat(fd.get(), part.c_str(), O_RDONLY | O_NOCTTY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC));
      if (!fd) break;
    }
  }
  if (!fd) {
    int err = errno;
    if (err == ENOENT) fail(missing.empty() ? "missing " + what + " in " + dir : missing);
    if (err == ELOOP && walked)
      fail(what + " in " + dir + " is reached through a symlink, which this system cannot confine to the layout");
    if (err == EXDEV || err == ELOOP)
      fail(what + " in " + dir + " is a symlink that leads out of the layout (or a loop)");
    throw_errno(ErrorKind::Image, "open " + what + " in " + dir, err);
  }
  if (::fstat(fd.get(), &st) != 0) throw_errno(ErrorKind::Image, "stat " + what + " in " + dir);
  if (!S_ISREG(st.st_mode)) fail(what + " in " + dir + " is not a regular file");
  int flags = ::fcntl(fd.get(), F_GETFL);
  if (flags < 0 || ::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK) != 0) {
    throw_errno(ErrorKind::Image, "open " + what + " in " + dir);
  }
  return fd;
}

std::string read_small_fd(int fd, const struct stat& st, const std::string& what) {
  if (st.st_size > kMaxJsonBlob) {
    fail(what + " is " + std::to_string(st.st_size) + " bytes, over the " + std::to_string(kMaxJsonBlob) +
         "-byte limit");
  }
  return read_up_to(fd, static_cast<size_t>(st.st_size), what, ErrorKind::Image);
}

// oci-layout and index.json: in the layout, as its blobs are; one that is not
// there is no OCI layout.
std::string read_small_file(const Layout& layout, const std::string& rel) {
  const std::string& dir = layout.dir;
  struct stat st {};
  UniqueFd fd = open_in_layout(layout, rel, rel, st, "not an OCI image layout: " + dir + " (missing " + rel + ")");
  return read_small_fd(fd.get(), st, dir + "/" + rel);
}

std::string string_field(const json& obj, const char* key, const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return {};
  if (!it->is_string()) fail(std::string("field '") + key + "' in " + where + " is not a string");
  return it->get<std::string>();
}

std::vector<std::string> string_array(const json& obj, const char* key, const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return {};
  if (!it->is_array()) fail(std::string("field '") + key + "' in " + where + " is not an array of strings");
  std::vector<std::string> out;
  for (const auto& v : *it) {
    if (!v.is_string()) fail(std::string("field '") + key + "' in " + where + " is not an array of strings");
    out.push_back(v.get<std::string>());
  }
  return out;
}

Descriptor parse_descriptor(const json& j, const std::string& where) {
  if (!j.is_object()) fail("descriptor in " + where + " is not an object");
  Descriptor d;
  d.media_type = string_field(j, "mediaType", where);
  d.digest = string_field(j, "digest", where);
  if (d.digest.empty()) fail("descriptor without a digest in " + where);
  detail::digest_hex(d.digest, where);
  if (auto it = j.find("size"); it != j.end()) {
    if (!it->is_number_integer() || it->get<int64_t>() < 0)
      fail("descriptor " + d.digest + " in " + where + " has a bad size");
    d.size = it->get<int64_t>();
  }
  if (auto it = j.find("annotations"); it != j.end() && it->is_object())
    d.ref_name = string_field(*it, kRefNameKey, where);
  if (auto it = j.find("platform"); it != j.end() && it->is_object()) {
    d.os = string_field(*it, "os", where);
    d.arch = string_field(*it, "architecture", where);
  }
  return d;
}

std::vector<Descriptor> parse_manifest_list(const json& index, const std::string& where) {
  if (!index.is_object()) fail(where + " is not a JSON object");
  auto it = index.find("manifests");
  if (it == index.end() || !it->is_array()) fail(where + " has no \"manifests\" array");
  std::vector<Descriptor> out;
  for (const auto& m : *it) out.push_back(parse_descriptor(m, where));
  return out;
}

std::string blob_path(const std::string& dir, const std::string& digest) {
  return dir + "/blobs/sha256/" + detail::digest_hex(digest, dir);
}

void check_blob_size(const std::string& dir, const Descriptor& d, int64_t actual) {
  if (d.size >= 0 && d.size != actual) {
    fail("corrupt blob " + d.digest + " in " + dir + ": size mismatch (descriptor says " + std::to_string(d.size) +
         " bytes, blob has " + std::to_string(actual) + ")");
  }
}

// Reads a small JSON blob and checks it against its descriptor's digest and size.
json read_verified_json_blob(const Layout& layout, const Descriptor& d) {
  const std::string& dir = layout.dir;
  struct stat st {};
  UniqueFd fd = open_in_layout(layout, "blobs/sha256/" + detail::digest_hex(d.digest, dir), "blob " + d.digest, st);
  std::string data = read_small_fd(fd.get(), st, "blob " + d.digest + " in " + dir);
  if (sha256_of(data) != d.digest) fail("corrupt blob " + d.digest + " in " + dir + ": digest mismatch");
  check_blob_size(dir, d, static_cast<int64_t>(data.size()));
  return parse_json(data, "blob " + d.digest + " in " + dir);
}

bool is_index_type(const std::string& mt) {
  return mt == "application/vnd.oci.image.index.v1+json" ||
         mt == "application/vnd.docker.distribution.manifest.list.v2+json";
}

bool is_manifest_type(const std::string& mt) {
  return mt == "application/vnd.oci.image.manifest.v1+json" ||
         mt == "application/vnd.docker.distribution.manifest.v2+json";
}

bool is_layer_type(const std::string& mt) {
  // tar, tar+gzip, tar+zstd and their "nondistributable" variants; Docker's schema 2 names.
  return mt.starts_with("application/vnd.oci.image.layer.") ||
         mt.starts_with("application/vnd.docker.image.rootfs.diff.tar") ||
         mt.starts_with("application/vnd.docker.image.rootfs.foreign.diff.tar");
}

std::string join_names(const std::set<std::string>& names) {
  if (names.empty()) return "none";
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

std::string available_tags(const std::vector<Descriptor>& ds) {
  std::set<std::string> tags;
  for (const auto& d : ds) {
    if (!d.ref_name.empty()) tags.insert(d.ref_name);
  }
  return join_names(tags);
}

// boxlite boots x86_64 guests, so among platform variants only linux/amd64 is usable.
Descriptor pick_platform(const std::vector<Descriptor>& ds, const std::string& where) {
  for (const auto& d : ds) {
    if (d.os == "linux" && d.arch == "amd64") return d;
  }
  bool any_platform =
      std::any_of(ds.begin(), ds.end(), [](const Descriptor& d) { return !d.os.empty() || !d.arch.empty(); });
  if (ds.size() == 1 && !any_platform) return ds.front();
  std::set<std::string> seen;
  for (const auto& d : ds) seen.insert(platform_name(d));
  fail("no linux/amd64 image in " + where + " (available: " + join_names(seen) + ")");
}

Descriptor pick_by_tag(const std::vector<Descriptor>& top, const std::string& dir, const std::string& tag) {
  if (top.empty()) fail("no images in " + dir + " (index.json lists no manifests)");
  std::vector<Descriptor> matches;
  if (!tag.empty()) {
    for (const auto& d : top) {
      if (d.ref_name == tag) matches.push_back(d);
    }
    if (matches.empty()) fail("tag '" + tag + "' not found in " + dir + " (available: " + available_tags(top) + ")");
  } else if (top.size() == 1) {
    matches = top;
  } else {
    for (const auto& d : top) {
      if (d.ref_name == "latest") matches.push_back(d);
    }
    if (matches.empty()) {
      fail("no tag given and " + dir + " holds " + std::to_string(top.size()) +
           " images, none tagged 'latest' (available: " + available_tags(top) + ")");
    }
  }
  // Several entries under one tag: a flattened multi-platform image.
  return matches.size() == 1 ? matches.front() : pick_platform(matches, dir + " tag '" + tag + "'");
}

struct ResolvedManifest {
  std::string digest;
  json manifest;
};

// Follows nested indexes down to an image manifest.
ResolvedManifest resolve_manifest(const Layout& layout, Descriptor d) {
  const std::string& dir = layout.dir;
  for (int depth = 0; depth <= kMaxIndexDepth; ++depth) {
    json j = read_verified_json_blob(layout, d);
    if (!j.is_object()) fail("blob " + d.digest + " in " + dir + " is not a JSON object");
    std::string mt = d.media_type.empty() ? string_field(j, "mediaType", dir) : d.media_type;
    if (is_index_type(mt) || (mt.empty() && j.contains("manifests"))) {
      d = pick_platform(parse_manifest_list(j, "index " + d.digest + " in " + dir), "index " + d.digest + " in " + dir);
      continue;
    }
    if (!is_manifest_type(mt) && !(mt.empty() && j.contains("layers"))) {
      fail("blob " + d.digest + " in " + dir + " has unsupported media type '" + mt + "'");
    }
    return {d.digest, std::move(j)};
  }
  fail("image indexes in " + dir + " nest deeper than " + std::to_string(kMaxIndexDepth) + " levels");
}

ImageConfig parse_config(const json& cfg, const std::string& where) {
  if (!cfg.is_object()) fail("image config " + where + " is not a JSON object");
  std::string os = string_field(cfg, "os", where), arch = string_field(cfg, "architecture", where);
  if ((!os.empty() && os != "linux") || (!arch.empty() && arch != "amd64")) {
    fail("image config " + where + " is for " + os + "/" + arch + "; boxlite runs linux/amd64 images");
  }
  ImageConfig out;
  auto it = cfg.find("config");
  if (it == cfg.end() || it->is_null()) return out;
  if (!it->is_object()) fail("\"config\" in image config " + where + " is not an object");
  out.env = string_array(*it, "Env", where);
  out.entrypoint = string_array(*it, "Entrypoint", where);
  out.cmd = string_array(*it, "Cmd", where);
  out.working_dir = string_field(*it, "WorkingDir", where);
  out.user = string_field(*it, "User", where);
  return out;
}

Layer make_layer(const Layout& layout, const Descriptor& d) {
  const std::string& dir = layout.dir;
  if (!is_layer_type(d.media_type)) {
    fail("layer " + d.digest + " in " + dir + " has unsupported media type '" + d.media_type + "'");
  }
  Layer l{d.digest, d.media_type, blob_path(dir, d.digest), 0, dir, layout.fd};
  struct stat st {};
  open_in_layout(layout, "blobs/sha256/" + detail::digest_hex(d.digest, dir), "blob " + d.digest + " (layer)", st);
  check_blob_size(dir, d, st.st_size);
  l.size = static_cast<uint64_t>(st.st_size);
  return l;
}

std::string absolute_dir(const std::string& dir) {
  std::string abs = std::filesystem::absolute(dir).lexically_normal().string();
  while (abs.size() > 1 && abs.back() == '/') abs.pop_back();
  return abs;
}

void check_layout_marker(const Layout& layout) {
  const std::string& dir = layout.dir;
  std::string path = dir + "/oci-layout";
  json marker = parse_json(read_small_file(layout, "oci-layout"), path);
  std::string version = marker.is_object() ? string_field(marker, "imageLayoutVersion", path) : "";
  if (!version.starts_with("1.")) fail("unsupported OCI layout version '" + version + "' in " + path);
}

}  // namespace

LayoutRef parse_layout_ref(const std::string& s) {
  LayoutRef ref;
  if (s.starts_with("oci:")) {
    std::string rest = s.substr(4);
    size_t colon = rest.find(':');
    ref.dir = rest.substr(0, colon);
    if (colon != std::string::npos) ref.tag = rest.substr(colon + 1);
  } else {
    ref.dir = s;
  }
  if (ref.dir.empty()) fail("invalid OCI layout reference '" + s + "': no directory");
  return ref;
}

LocalImage open_oci_layout(const LayoutRef& ref) {
  LocalImage img;
  img.layout_dir = absolute_dir(ref.dir);
  img.tag = ref.tag;
  const std::string& dir = img.layout_dir;
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) {
    int err = errno;
    if (err == ENOENT || err == ENOTDIR) fail("OCI image layout directory not found: " + dir);
    fail(errno_text("OCI image layout directory " + dir + " cannot be read", err));
  }
  if (!S_ISDIR(st.st_mode)) fail("OCI image layout directory not found: " + dir + " (not a directory)");
  auto pinned = std::make_shared<const UniqueFd>(::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!*pinned) throw_errno(ErrorKind::Image, "open OCI image layout directory " + dir);
  Layout layout{dir, pinned};
  check_layout_marker(layout);
  std::string index_path = dir + "/index.json";
  json index = parse_json(read_small_file(layout, "index.json"), index_path);
  Descriptor top = pick_by_tag(parse_manifest_list(index, index_path), dir, ref.tag);
  if (img.tag.empty()) img.tag = top.ref_name;

  ResolvedManifest rm = resolve_manifest(layout, top);
  img.manifest_digest = rm.digest;
  std::string where = "manifest " + rm.digest + " in " + dir;
  auto cfg_it = rm.manifest.find("config");
  if (cfg_it == rm.manifest.end()) fail(where + " has no config descriptor");
  Descriptor cfg_desc = parse_descriptor(*cfg_it, where);
  img.config = parse_config(read_verified_json_blob(layout, cfg_desc), cfg_desc.digest + " in " + dir);

  auto layers_it = rm.manifest.find("layers");
  if (layers_it == rm.manifest.end() || !layers_it->is_array()) fail(where + " has no \"layers\" array");
  for (const auto& l : *layers_it) img.layers.push_back(make_layer(layout, parse_descriptor(l, where)));
  return img;
}

UniqueFd open_layer_blob(const Layer& layer, struct stat& st) {
  if (!layer.layout_fd) fail("layer " + layer.digest + " was not read from a layout");
  UniqueFd fd = open_in_layout({layer.layout_dir, layer.layout_fd},
                               "blobs/sha256/" + detail::digest_hex(layer.digest, layer.layout_dir),
                               "blob " + layer.digest + " (layer)", st);
  if (static_cast<uint64_t>(st.st_size) != layer.size) {
    fail("blob " + layer.digest + " in " + layer.layout_dir + " changed size since its manifest was read (" +
         std::to_string(layer.size) + " bytes, now " + std::to_string(st.st_size) + ")");
  }
  // What it unpacks to is capped by the image's budget; so is what is read of it (a
  // sparse multi-TiB blob would otherwise be hashed to its end).
  if (uint64_t max = max_image_bytes(); static_cast<uint64_t>(st.st_size) > max) {
    fail("layer blob " + layer.digest + " in " + layer.layout_dir + " is " + std::to_string(st.st_size) +
         " bytes, over the " + std::to_string(max) + "-byte image size limit (BOXLITE_MAX_IMAGE_BYTES)");
  }
  return fd;
}

void verify_open_blob(int fd, const Layer& layer) {
  if (detail::sha256_fd(fd, "blob " + layer.blob_path) != layer.digest)
    fail("corrupt blob " + layer.digest + " at " + layer.blob_path + ": digest mismatch");
}

void verify_blob(const Layer& layer) {
  struct stat st {};
  UniqueFd fd = open_layer_blob(layer, st);
  verify_open_blob(fd.get(), layer);
}

}  // namespace boxlite::image

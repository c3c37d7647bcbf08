#include "registry/store.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "common/error.hpp"
#include "common/io.hpp"
#include "common/sha256.hpp"
#include "registry/reference.hpp"

namespace boxlite::registry {

namespace {

using nlohmann::json;
constexpr const char* kRefName = "org.opencontainers.image.ref.name";
constexpr const char* kPulledAt = "ai.boxlite.pulled-at-ms";

json read_index(const std::string& dir) {
  std::string path = dir + "/index.json";
  if (!path_exists(path))
    return json{
        {"schemaVersion", 2}, {"mediaType", "application/vnd.oci.image.index.v1+json"}, {"manifests", json::array()}};
  try {
    json j = json::parse(read_file(path));
    if (!j.is_object() || !j.contains("manifests") || !j["manifests"].is_array())
      throw Error(ErrorKind::Storage, "no manifests array");
    return j;
  } catch (const json::exception& e) {
    throw Error(ErrorKind::Storage, "corrupt image store index " + path + ": " + e.what());
  }
}

void write_index(const std::string& dir, const json& j) { write_file_atomic(dir + "/index.json", j.dump(2) + "\n"); }

std::string ref_of(const json& entry) {
  auto a = entry.find("annotations");
  if (a == entry.end() || !a->is_object()) return {};
  return a->value(kRefName, std::string());
}

// The config and layer digests a manifest names (empty if it is unreadable).
std::vector<std::pair<std::string, uint64_t>> manifest_blobs(const ImageStore& s, const std::string& digest) {
  std::vector<std::pair<std::string, uint64_t>> out;
  std::string path = s.blob_path(digest);
  if (!path_exists(path)) return out;
  try {
    json m = json::parse(read_file(path));
    auto add = [&](const json& d) {
      std::string dg = d.value("digest", std::string());
      if (is_sha256_digest(dg)) out.emplace_back(dg, d.value("size", uint64_t{0}));
    };
    if (m.contains("config") && m["config"].is_object()) add(m["config"]);
    if (m.contains("layers") && m["layers"].is_array()) {
      for (const auto& l : m["layers"]) {
        if (l.is_object()) add(l);
      }
    }
  } catch (const json::exception&) {
  }
  return out;
}

}  // namespace

ImageStore::ImageStore(std::string images_dir) : dir_(std::move(images_dir) + "/oci") {
  make_dirs(dir_ + "/blobs/sha256", 0755);
  make_dirs(dir_ + "/ingest", 0700);
  if (!path_exists(dir_ + "/oci-layout"))
    write_file_atomic(dir_ + "/oci-layout", "{\"imageLayoutVersion\":\"1.0.0\"}\n");
  if (!path_exists(dir_ + "/index.json")) {
    auto l = lock();
    if (!path_exists(dir_ + "/index.json")) write_index(dir_, read_index(dir_));
  }
}

UniqueFd ImageStore::lock() const {
  std::string path = dir_ + "/index.lock";
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  if (!fd) throw_errno(ErrorKind::Storage, "open image store lock " + path);
  while (::flock(fd.get(), LOCK_EX) != 0) {
    if (errno != EINTR) throw_errno(ErrorKind::Storage, "lock " + path);
  }
  return fd;
}

std::string ImageStore::blob_path(const std::string& digest) const {
  if (!is_sha256_digest(digest)) throw Error(ErrorKind::Image, "invalid blob digest '" + digest.substr(0, 80) + "'");
  return dir_ + "/blobs/sha256/" + digest.substr(7);
}

bool ImageStore::has_blob(const std::string& digest) const { return path_exists(blob_path(digest)); }

ImageStore::Ingest::Ingest(const ImageStore& store, std::string digest) : store_(store), digest_(std::move(digest)) {
  path_ = store_.dir_ + "/ingest/" + digest_.substr(7, 16) + "-" + random_hex(8);
  fd_ = UniqueFd(::open(path_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  if (!fd_) throw_errno(ErrorKind::Storage, "create " + path_);
}

ImageStore::Ingest::~Ingest() {
  if (!committed_) ::unlink(path_.c_str());
}

void ImageStore::Ingest::restart() {
  if (::ftruncate(fd_.get(), 0) != 0 || ::lseek(fd_.get(), 0, SEEK_SET) != 0)
    throw_errno(ErrorKind::Storage, "truncate " + path_);
}

void ImageStore::Ingest::commit(const std::string& actual_digest) {
  if (actual_digest != digest_) {
    throw Error(ErrorKind::Image, "blob " + digest_ + " failed verification: its content hashes to " + actual_digest);
  }
  if (::fsync(fd_.get()) != 0) throw_errno(ErrorKind::Storage, "fsync " + path_);
  std::string dest = store_.blob_path(digest_);
  if (::rename(path_.c_str(), dest.c_str()) != 0) throw_errno(ErrorKind::Storage, "rename " + path_ + " to " + dest);
  committed_ = true;
}

std::string ImageStore::put_blob(const std::string& data) {
  std::string digest = sha256_of(data);
  std::string path = blob_path(digest);
  if (!path_exists(path)) write_file_atomic(path, data);
  return digest;
}

void ImageStore::tag(const std::string& reference, const std::string& manifest_digest, const std::string& media_type,
                     uint64_t size) {
  auto l = lock();
  json index = read_index(dir_);
  json kept = json::array();
  for (const auto& m : index["manifests"]) {
    // Already so (a warm pull): no rewrite, no fsync.
    if (ref_of(m) == reference && m.value("digest", std::string()) == manifest_digest) return;
    if (ref_of(m) != reference) kept.push_back(m);
  }
  kept.push_back(json{{"mediaType", media_type},
                      {"digest", manifest_digest},
                      {"size", size},
                      {"annotations", {{kRefName, reference}, {kPulledAt, std::to_string(wall_clock_ms())}}}});
  index["manifests"] = kept;
  write_index(dir_, index);
}

std::optional<std::string> ImageStore::lookup(const std::string& reference) const {
  json index = read_index(dir_);
  for (const auto& m : index["manifests"]) {
    if (ref_of(m) != reference) continue;
    std::string digest = m.value("digest", std::string());
    if (!is_sha256_digest(digest) || !has_blob(digest)) return std::nullopt;
    auto blobs = manifest_blobs(*this, digest);
    if (blobs.empty()) return std::nullopt;
    for (const auto& [b, size] : blobs) {
      if (!has_blob(b)) return std::nullopt;
    }
    return digest;
  }
  return std::nullopt;
}

std::vector<StoredImage> ImageStore::list() const {
  std::vector<StoredImage> out;
  json index = read_index(dir_);
  for (const auto& m : index["manifests"]) {
    StoredImage s;
    s.reference = ref_of(m);
    s.manifest_digest = m.value("digest", std::string());
    s.media_type = m.value("mediaType", std::string());
    if (!is_sha256_digest(s.manifest_digest)) continue;
    s.size = m.value("size", uint64_t{0});
    for (const auto& [b, size] : manifest_blobs(*this, s.manifest_digest)) {
      s.blobs.push_back(b);
      s.size += size;
    }
    try {
      s.created_ms = std::stoll(m["annotations"].value(kPulledAt, std::string("0")));
    } catch (const std::exception&) {
    }
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<std::string> ImageStore::untag(const std::vector<std::string>& references) {
  auto l = lock();
  json index = read_index(dir_);
  json kept = json::array();
  std::vector<std::string> removed;
  std::set<std::string> drop(references.begin(), references.end());
  for (const auto& m : index["manifests"]) {
    if (drop.count(ref_of(m))) {
      removed.push_back(m.value("digest", std::string()));
    } else {
      kept.push_back(m);
    }
  }
  index["manifests"] = kept;
  write_index(dir_, index);
  return removed;
}

namespace {

UniqueFd flock_file(const std::string& path, int how) {
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  if (!fd) throw_errno(ErrorKind::Storage, "open lock " + path);
  while (::flock(fd.get(), how) != 0) {
    if (errno != EINTR) throw_errno(ErrorKind::Storage, "lock " + path);
  }
  return fd;
}

}  // namespace

UniqueFd ImageStore::pull_guard() const { return flock_file(dir_ + "/pull.lock", LOCK_SH); }

uint64_t ImageStore::collect_garbage() {
  auto pulls = flock_file(dir_ + "/pull.lock", LOCK_EX);
  auto l = lock();
  std::set<std::string> live;
  json index = read_index(dir_);
  for (const auto& m : index["manifests"]) {
    std::string d = m.value("digest", std::string());
    if (!is_sha256_digest(d)) continue;
    live.insert(d.substr(7));
    for (const auto& [b, size] : manifest_blobs(*this, d)) live.insert(b.substr(7));
  }
  uint64_t freed = 0;
  std::string blobs = dir_ + "/blobs/sha256";
  std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir(blobs.c_str()), ::closedir);
  if (!d) throw_errno(ErrorKind::Storage, "open " + blobs);
  std::vector<std::string> dead;
  while (auto* e = ::readdir(d.get())) {
    std::string name = e->d_name;
    if (name == "." || name == ".." || live.count(name)) continue;
    dead.push_back(name);
  }
  for (const auto& name : dead) {
    std::string path = blobs + "/" + name;
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0) continue;
    if (::unlink(path.c_str()) == 0) freed += static_cast<uint64_t>(st.st_size);
  }
  // Ingest files of pulls that were killed (no pull runs now: we hold the lock).
  std::string ingest = dir_ + "/ingest";
  std::unique_ptr<DIR, int (*)(DIR*)> in(::opendir(ingest.c_str()), ::closedir);
  while (in && true) {
    auto* e = ::readdir(in.get());
    if (!e) break;
    std::string name = e->d_name;
    if (name != "." && name != "..") ::unlink((ingest + "/" + name).c_str());
  }
  return freed;
}

}  // namespace boxlite::registry

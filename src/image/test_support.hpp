// Fixture builders for tests (header-only; the library itself never includes it):
// scratch directories, layer tars written with libarchive, OCI layouts.
#pragma once

#include <archive.h>
#include <archive_entry.h>
#include <openssl/evp.h>
#include <stdlib.h>

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.hpp"
#include "common/io.hpp"

namespace boxlite::image::testing {

// A directory under $TMPDIR (or /tmp), removed with its contents at scope end.
class ScratchDir {
 public:
  ScratchDir() {
    const char* t = ::getenv("TMPDIR");
    std::string tmpl = std::string(t && *t ? t : "/tmp") + "/boxlite-test-XXXXXX";
    if (!::mkdtemp(tmpl.data())) throw_errno(ErrorKind::Internal, "mkdtemp");
    path_ = tmpl;
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  ~ScratchDir() {
    try {
      remove_tree(path_);
    } catch (...) {
    }
  }
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& rel) const { return path_ + "/" + rel; }

 private:
  std::string path_;
};

inline std::string sha256_hex(std::string_view data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), md, &len, EVP_sha256(), nullptr);
  return hex_encode(md, len);
}

// Writes a layer tar entry by entry (pax format, like real images).
class TarWriter {
 public:
  enum class Compression { None, Gzip, Zstd };

  explicit TarWriter(const std::string& path, Compression c = Compression::None) : a_(archive_write_new()) {
    archive_write_set_format_pax_restricted(a_);
    if (c == Compression::Gzip) archive_write_add_filter_gzip(a_);
    if (c == Compression::Zstd && archive_write_add_filter_zstd(a_) != ARCHIVE_OK) {
      throw Error(ErrorKind::Unsupported, "libarchive without zstd");
    }
    if (archive_write_open_filename(a_, path.c_str()) != ARCHIVE_OK) check(ARCHIVE_FATAL, path);
  }
  TarWriter(const TarWriter&) = delete;
  TarWriter& operator=(const TarWriter&) = delete;
  ~TarWriter() {
    if (a_) archive_write_free(a_);
  }

  TarWriter& file(const std::string& path, std::string_view data, int mode = 0644, int64_t uid = 0, int64_t gid = 0) {
    archive_entry* e = entry(path, AE_IFREG, mode, uid, gid);
    archive_entry_set_size(e, static_cast<la_int64_t>(data.size()));
    check(archive_write_header(a_, e), path);
    if (!data.empty()) archive_write_data(a_, data.data(), data.size());
    archive_entry_free(e);
    return *this;
  }
  TarWriter& dir(const std::string& path, int mode = 0755, int64_t uid = 0, int64_t gid = 0) {
    archive_entry* e = entry(path, AE_IFDIR, mode, uid, gid);
    check(archive_write_header(a_, e), path);
    archive_entry_free(e);
    return *this;
  }
  TarWriter& symlink(const std::string& path, const std::string& target, int64_t uid = 0, int64_t gid = 0) {
    archive_entry* e = entry(path, AE_IFLNK, 0777, uid, gid);
    archive_entry_set_symlink(e, target.c_str());
    check(archive_write_header(a_, e), path);
    archive_entry_free(e);
    return *this;
  }
  TarWriter& hardlink(const std::string& path, const std::string& target) {
    archive_entry* e = entry(path, AE_IFREG, 0644, 0, 0);
    archive_entry_set_hardlink(e, target.c_str());
    archive_entry_set_size(e, 0);
    check(archive_write_header(a_, e), path);
    archive_entry_free(e);
    return *this;
  }
  // AE_IFCHR, AE_IFBLK or AE_IFIFO.
  TarWriter& node(const std::string& path, unsigned type) {
    archive_entry* e = entry(path, type, 0666, 0, 0);
    archive_entry_set_rdevmajor(e, 1);
    archive_entry_set_rdevminor(e, 3);
    check(archive_write_header(a_, e), path);
    archive_entry_free(e);
    return *this;
  }
  void close() {
    if (!a_) return;
    check(archive_write_close(a_), "close");
    archive_write_free(a_);
    a_ = nullptr;
  }

 private:
  archive_entry* entry(const std::string& path, unsigned type, int mode, int64_t uid, int64_t gid) {
    archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, path.c_str());
    archive_entry_set_filetype(e, type);
    archive_entry_set_perm(e, static_cast<mode_t>(mode));
    archive_entry_set_uid(e, uid);
    archive_entry_set_gid(e, gid);
    archive_entry_set_mtime(e, 1700000000, 0);
    return e;
  }
  void check(int r, const std::string& what) {
    if (r < ARCHIVE_WARN) {
      const char* m = archive_error_string(a_);
      throw Error(ErrorKind::Internal, "test tar " + what + ": " + (m ? m : "?"));
    }
  }
  archive* a_;
};

// Builds an OCI image layout directory: blobs, index.json, oci-layout.
class LayoutWriter {
 public:
  explicit LayoutWriter(std::string dir) : dir_(std::move(dir)) {
    make_dirs(dir_ + "/blobs/sha256");
    write_file_atomic(dir_ + "/oci-layout", R"({"imageLayoutVersion":"1.0.0"})");
  }
  // Stores data as a blob; returns "sha256:<hex>".
  std::string blob(std::string_view data) {
    std::string hex = sha256_hex(data);
    write_file_atomic(dir_ + "/blobs/sha256/" + hex, data);
    return "sha256:" + hex;
  }
  static nlohmann::json descriptor(const std::string& media_type, const std::string& digest, size_t size) {
    return {{"mediaType", media_type}, {"digest", digest}, {"size", size}};
  }
  // Stores config + manifest for the given layer files (gzip or plain tars);
  // returns the manifest's descriptor (not yet in the index).
  nlohmann::json image(const nlohmann::json& config_object, const std::vector<std::string>& layer_files,
                       const std::string& arch = "amd64") {
    nlohmann::json layers = nlohmann::json::array();
    for (const auto& f : layer_files) {
      std::string data = read_file(f);
      layers.push_back(descriptor("application/vnd.oci.image.layer.v1.tar", blob(data), data.size()));
    }
    nlohmann::json config = {{"architecture", arch},
                             {"os", "linux"},
                             {"config", config_object},
                             {"rootfs", {{"type", "layers"}, {"diff_ids", nlohmann::json::array()}}}};
    std::string cdata = config.dump();
    nlohmann::json manifest = {
        {"schemaVersion", 2},
        {"mediaType", "application/vnd.oci.image.manifest.v1+json"},
        {"config", descriptor("application/vnd.oci.image.config.v1+json", blob(cdata), cdata.size())},
        {"layers", layers}};
    std::string mdata = manifest.dump();
    return descriptor("application/vnd.oci.image.manifest.v1+json", blob(mdata), mdata.size());
  }
  static nlohmann::json tagged(nlohmann::json desc, const std::string& tag) {
    desc["annotations"] = {{"org.opencontainers.image.ref.name", tag}};
    return desc;
  }
  void index(const std::vector<nlohmann::json>& manifests) {
    nlohmann::json idx = {
        {"schemaVersion", 2}, {"mediaType", "application/vnd.oci.image.index.v1+json"}, {"manifests", manifests}};
    write_file_atomic(dir_ + "/index.json", idx.dump());
  }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

}  // namespace boxlite::image::testing

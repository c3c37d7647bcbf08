// The content-addressed store every pulled image lives in: one OCI image layout at
// <home>/images/oci (oci-layout, index.json, blobs/sha256/<hex>), so a layer shared
// by images is stored (and downloaded) once, and image::open_oci_layout reads a
// pulled image like any other layout: the index entry's
// "org.opencontainers.image.ref.name" is the normalized reference.
//
// Blobs appear only complete and verified: they are written under ingest/, fsynced,
// checked against their sha256 and renamed into blobs/. index.json is rewritten
// atomically under a flock of <home>/images/oci/index.lock, so processes can pull
// into one home at once.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "boxlite/images.hpp"
#include "common/fd.hpp"

namespace boxlite::registry {

using StoredImage = boxlite::ImageInfo;  // boxlite/images.hpp

class ImageStore {
 public:
  explicit ImageStore(std::string images_dir);  // <home>/images

  const std::string& layout_dir() const { return dir_; }
  std::string blob_path(const std::string& digest) const;  // validates the digest
  bool has_blob(const std::string& digest) const;

  // A fresh temp file under ingest/ for one download; removed with the object
  // unless committed.
  class Ingest {
   public:
    Ingest(const ImageStore& store, std::string digest);
    ~Ingest();
    Ingest(const Ingest&) = delete;
    Ingest& operator=(const Ingest&) = delete;
    int fd() const { return fd_.get(); }
    // Truncates for a retry.
    void restart();
    // fsync, verify sha256 (computed by the writer) and rename into blobs/.
    void commit(const std::string& actual_digest);

   private:
    const ImageStore& store_;
    std::string digest_, path_;
    UniqueFd fd_;
    bool committed_ = false;
  };

  // Small blobs (manifests, configs) from memory; the digest is computed here.
  std::string put_blob(const std::string& data);

  // Points `reference` at the manifest (replacing its previous target).
  void tag(const std::string& reference, const std::string& manifest_digest, const std::string& media_type,
           uint64_t size);
  // The stored manifest digest of `reference` when it and all its blobs are here.
  std::optional<std::string> lookup(const std::string& reference) const;

  std::vector<StoredImage> list() const;
  // Removes the references (not blobs); returns the manifests they pointed to.
  std::vector<std::string> untag(const std::vector<std::string>& references);
  // Removes every blob no reference needs (and stale ingest files); returns bytes freed.
  // Waits for pulls in progress (see pull_guard) so that it never removes a blob a
  // pull has downloaded but not tagged yet.
  uint64_t collect_garbage();
  // Held (shared) by a pull from its first download until its tag is written.
  UniqueFd pull_guard() const;

 private:
  std::string dir_;
  UniqueFd lock() const;  // exclusive flock of index.lock, released with the fd
};

}  // namespace boxlite::registry

#include "rootfs/rootfs.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>

#include "common/error.hpp"
#include "common/fd.hpp"
#include "common/file_lock.hpp"
#include "common/io.hpp"
#include "common/process.hpp"
#include "image/oci_layout.hpp"
#include "image/unpack.hpp"

namespace boxlite::rootfs {

namespace {

constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kFsBlock = 4096;

[[noreturn]] void storage_fail(const std::string& msg) { throw Error(ErrorKind::Storage, msg); }

// An unprivileged builder cannot empty directories the image made read-only
// (e.g. 0555); give their owner (us) write access back, then remove.
void force_remove_tree(const std::string& path) {
  namespace fs = std::filesystem;
  try {
    remove_tree(path);
    return;
  } catch (const Error&) {
  }
  std::error_code ec;
  ::chmod(path.c_str(), 0700);
  for (fs::recursive_directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_directory(ec) && !it->is_symlink(ec)) ::chmod(it->path().c_str(), 0700);
  }
  remove_tree(path);
}

// A scratch directory removed with everything in it when the scope ends, error or not.
class TempDir {
 public:
  TempDir(const std::string& parent, const std::string& prefix) {
    std::string tmpl = parent + "/" + prefix + "-XXXXXX";
    if (!::mkdtemp(tmpl.data())) throw_errno(ErrorKind::Storage, "create temp dir in " + parent);
    path_ = tmpl;
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    if (path_.empty()) return;
    try {
      force_remove_tree(path_);
    } catch (...) {  // nothing sane to do in a destructor; a stale dir under tmp/ is harmless
    }
  }
  const std::string& path() const { return path_; }
  // The directory was renamed away: nothing left to remove.
  void release() { path_.clear(); }

 private:
  std::string path_;
};

// A file that is unlinked when the scope ends unless commit() was called.
class PendingFile {
 public:
  explicit PendingFile(std::string path) : path_(std::move(path)) {}
  PendingFile(const PendingFile&) = delete;
  PendingFile& operator=(const PendingFile&) = delete;
  ~PendingFile() {
    if (!committed_) ::unlink(path_.c_str());
  }
  const std::string& path() const { return path_; }
  void commit() { committed_ = true; }

 private:
  std::string path_;
  bool committed_ = false;
};

// An exclusive flock held for the scope; closing the fd releases it, also when the
// process dies, so a crashed builder never blocks the next one.
class FileLock {
 public:
  explicit FileLock(const std::string& path) : fd_(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644)) {
    if (!fd_) throw_errno(ErrorKind::Storage, "open lock file " + path);
    while (::flock(fd_.get(), LOCK_EX) != 0) {
      if (errno != EINTR) throw_errno(ErrorKind::Storage, "lock " + path);
    }
  }

 private:
  UniqueFd fd_;
};

// e2fsprogs and qemu-utils live in sbin/bin dirs that an unprivileged user's PATH may lack.
std::string find_tool(const std::string& name, const std::string& package) {
  std::string p = which(name);
  if (!p.empty()) return p;
  for (const char* dir : {"/usr/sbin", "/sbin", "/usr/local/sbin", "/usr/bin", "/bin"}) {
    std::string candidate = std::string(dir) + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  storage_fail(name + " not found (install " + package + ")");
}

std::string tool_failure(const RunResult& r) {
  std::string err = trim(r.err.empty() ? r.out : r.err);
  if (err.size() > 4096) err = err.substr(0, 4096) + "...";
  return describe_status(r.status) + (err.empty() ? "" : ": " + err);
}

RunResult run_tool(const std::vector<std::string>& argv) {
  try {
    return run_capture(argv);
  } catch (const Error& e) {
    storage_fail(std::string("cannot run ") + argv[0] + ": " + e.what());
  }
}

// The hex of a "sha256:<64 lowercase hex>" digest; anything else never becomes a path.
std::string digest_hex(const std::string& d, const std::string& what, const image::LocalImage& img) {
  bool ok =
      d.starts_with("sha256:") && d.size() == 71 && d.find_first_not_of("0123456789abcdef", 7) == std::string::npos;
  if (!ok) throw Error(ErrorKind::Image, "malformed " + what + " digest '" + d + "' for image " + img.layout_dir);
  return d.substr(7);
}

std::string manifest_hex(const image::LocalImage& img) { return digest_hex(img.manifest_digest, "manifest", img); }

// Disk space the tree will take in ext4: every inode costs at least a 4 KiB block,
// which also leaves room in the inode table for trees of many tiny files.
uint64_t tree_bytes(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  uint64_t total = 0;
  for (fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec), end;
       !ec && it != end; it.increment(ec)) {
    struct stat st;
    if (::lstat(it->path().c_str(), &st) != 0) continue;
    uint64_t sz = S_ISREG(st.st_mode) ? static_cast<uint64_t>(st.st_size) : 0;
    total += std::max(kFsBlock, (sz + kFsBlock - 1) / kFsBlock * kFsBlock);
  }
  if (ec) storage_fail("measure unpacked image " + dir + ": " + ec.message());
  return total;
}

uint64_t ext4_size_for(uint64_t content) {
  uint64_t size = content + content / 4 + 256 * kMiB;
  return (size + kMiB - 1) / kMiB * kMiB;
}

void make_sparse_file(const std::string& path, uint64_t size) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  if (!fd) throw_errno(ErrorKind::Storage, "create " + path);
  if (::ftruncate(fd.get(), static_cast<off_t>(size)) != 0) throw_errno(ErrorKind::Storage, "size " + path);
}

void run_mkfs(const std::string& tree, const std::string& file, uint64_t size, const std::string& digest) {
  std::string mkfs = find_tool("mkfs.ext4", "e2fsprogs");
  RunResult r = run_tool({mkfs, "-q", "-F", "-L", "rootfs",
                          // 4 KiB blocks even when small: the guest grows this file system
                          // online to disk_size_gb, and 1 KiB blocks make that 4x the work.
                          "-b", "4096", "-E", "root_owner=0:0", "-d", tree, file, std::to_string(size / kMiB) + "M"});
  if (!r.ok()) storage_fail("mkfs.ext4 failed building " + file + " for image " + digest + ": " + tool_failure(r));
}

std::string metadata_json(const image::LocalImage& img, uint64_t size) {
  nlohmann::json j;
  j["manifest_digest"] = img.manifest_digest;
  j["tag"] = img.tag;
  j["size_bytes"] = size;
  j["config"] = {{"Env", img.config.env},
                 {"Entrypoint", img.config.entrypoint},
                 {"Cmd", img.config.cmd},
                 {"WorkingDir", img.config.working_dir},
                 {"User", img.config.user}};
  nlohmann::json layers = nlohmann::json::array();
  for (const auto& l : img.layers) layers.push_back(l.digest);
  j["layers"] = layers;
  return j.dump(2) + "\n";
}

// ---- verified blobs ------------------------------------------------------------
//
// A cached layer (or a disk image built from layers) stands for a digest. A layout
// that names the digest gets it only once its own blob was seen to hash to it, or
// anyone who knew a digest would get that layer's content from an empty file named
// after it. Hashing every blob at every start would cost milliseconds, so a blob
// file, once verified, is recorded by what any change to it changes (device, inode,
// size, mtime, ctime) in <home>/images/verified/<hex>; the next use costs an fstat
// and a small read. The same file records the layer's unpacked size for the jail's
// per-image budget.

constexpr size_t kMaxVerifiedFiles = 16;  // blob files remembered per digest

std::string verified_path(const std::string& home, const std::string& hex) { return home + "/images/verified/" + hex; }

std::string blob_identity(const struct stat& st) {
  auto ns = [](const timespec& t) { return std::to_string(t.tv_sec) + "." + std::to_string(t.tv_nsec); };
  return std::to_string(st.st_dev) + " " + std::to_string(st.st_ino) + " " + std::to_string(st.st_size) + " " +
         ns(st.st_mtim) + " " + ns(st.st_ctim);
}

struct VerifiedRecord {
  std::optional<uint64_t> unpacked_bytes;  // the jail layer's budget_used, when recorded
  std::vector<std::string> files;          // blob_identity lines, newest last
};

VerifiedRecord read_verified(const std::string& home, const std::string& hex) {
  VerifiedRecord r;
  std::string text;
  try {
    text = read_file_if_present(verified_path(home, hex)).value_or("");
  } catch (const Error&) {
    return r;  // unreadable: verified again
  }
  for (const auto& line : split(text, '\n')) {
    if (line.starts_with("bytes ")) {
      try {
        r.unpacked_bytes = std::stoull(line.substr(6));
      } catch (const std::exception&) {
      }
    } else if (!line.empty()) {
      r.files.push_back(line);
    }
  }
  return r;
}

void write_verified(const std::string& home, const std::string& hex, VerifiedRecord r) {
  if (r.files.size() > kMaxVerifiedFiles) r.files.erase(r.files.begin(), r.files.end() - kMaxVerifiedFiles);
  std::string text = r.unpacked_bytes ? "bytes " + std::to_string(*r.unpacked_bytes) + "\n" : "";
  for (const auto& f : r.files) text += f + "\n";
  try {
    make_dirs(home + "/images/verified", 0700);
    write_file_atomic(verified_path(home, hex), text, 0600);
  } catch (const Error&) {
    // Unrecorded: the blob is hashed again next time.
  }
}

// Adds a verified blob file (and the layer's unpacked size, when known) to the
// record, under its lock: processes verifying the same digest merge what they add.
// Returns the unpacked size the record then holds.
std::optional<uint64_t> record_verified_blob(const std::string& home, const std::string& hex, const struct stat& st,
                                             std::optional<uint64_t> unpacked_bytes) {
  try {
    make_dirs(home + "/locks");
    FileLock lock(home + "/locks/verified-" + hex + ".lock");
    VerifiedRecord r = read_verified(home, hex);
    std::string id = blob_identity(st);
    if (unpacked_bytes) r.unpacked_bytes = unpacked_bytes;
    if (std::find(r.files.begin(), r.files.end(), id) == r.files.end()) r.files.push_back(id);
    std::optional<uint64_t> bytes = r.unpacked_bytes;
    write_verified(home, hex, std::move(r));
    return bytes;
  } catch (const Error&) {
    return unpacked_bytes;  // unrecorded: the blob is hashed again next time
  }
}

// For a cached layer: the layout's blob must be what the cache was built from.
// Returns the layer's recorded unpacked size, if any.
std::optional<uint64_t> check_cached_blob(const std::string& home, const std::string& hex, const image::Layer& layer) {
  struct stat st {};
  UniqueFd fd = image::open_layer_blob(layer, st);
  VerifiedRecord r = read_verified(home, hex);
  std::string id = blob_identity(st);
  if (std::find(r.files.begin(), r.files.end(), id) != r.files.end()) return r.unpacked_bytes;
  image::verify_open_blob(fd.get(), layer);
  return record_verified_blob(home, hex, st, std::nullopt);
}

void build_base(const std::string& home, const image::LocalImage& img, const std::string& hex,
                const std::string& final_path) {
  TempDir tree(home + "/tmp", "unpack-" + hex.substr(0, 12));
  // mkdtemp makes 0700; mkfs copies the mode to the guest's "/".
  if (::chmod(tree.path().c_str(), 0755) != 0) throw_errno(ErrorKind::Storage, "chmod " + tree.path());
  uint64_t budget = image::max_image_bytes();  // one budget for all layers together
  std::vector<std::pair<std::string, struct stat>> verified;
  for (const auto& layer : img.layers) {
    struct stat st {};
    budget -= image::apply_layer_blob(tree.path(), layer, budget, &st).budget_used();
    verified.emplace_back(digest_hex(layer.digest, "layer", img), st);
  }
  for (const auto& [layer_hex, st] : verified) record_verified_blob(home, layer_hex, st, std::nullopt);

  uint64_t size = ext4_size_for(tree_bytes(tree.path()));
  std::string dir = home + "/images/disk-images";
  PendingFile out(dir + "/." + hex + ".ext4.tmp-" + random_hex(4));
  make_sparse_file(out.path(), size);
  run_mkfs(tree.path(), out.path(), size, img.manifest_digest);
  // The json first: whoever sees the .ext4 also finds its metadata.
  write_file_atomic(dir + "/" + hex + ".json", metadata_json(img, size));
  if (::rename(out.path().c_str(), final_path.c_str()) != 0) {
    throw_errno(ErrorKind::Storage, "rename " + out.path() + " to " + final_path);
  }
  out.commit();
}

constexpr uint32_t kBoxIds = 65536;

bool has_opaque_root(const std::string& dir) {
  char v = 0;
  return ::lgetxattr(dir.c_str(), "trusted.overlay.opaque", &v, 1) == 1 && v == 'y';
}

// Returns the layer's budget_used.
uint64_t build_overlay_layer(const std::string& home, const image::Layer& layer, uint32_t offset,
                             const std::string& dir, const std::string& hex, const std::string& final_path,
                             uint64_t budget) {
  if (::geteuid() != 0) {  // before reading a possibly large blob for nothing
    throw Error(ErrorKind::Unsupported, "cannot prepare layer " + layer.digest + " owned by uid " +
                                            std::to_string(offset) +
                                            "+: the jail engine needs root to prepare shifted layers");
  }
  // In the cache directory itself, so that the rename stays within one filesystem.
  TempDir tmp(dir, ".tmp-" + hex.substr(0, 12) + "-" + std::to_string(offset));
  struct stat blob_st {};
  uint64_t used =
      image::extract_layer_blob_for_overlay(tmp.path(), layer, {offset, offset, budget}, &blob_st).budget_used();
  UniqueFd root(::open(tmp.path().c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!root) throw_errno(ErrorKind::Storage, "open " + tmp.path());
  // Whatever the tar said about "./": the box's root-owned, world-searchable layer root.
  if (::fchown(root.get(), offset, offset) != 0) throw_errno(ErrorKind::Storage, "chown " + tmp.path());
  if (::fchmod(root.get(), 0755) != 0) throw_errno(ErrorKind::Storage, "chmod " + tmp.path());
  // Durable before it is published: a crash must not leave a half-written layer that
  // looks complete.
  if (::syncfs(root.get()) != 0) throw_errno(ErrorKind::Storage, "sync " + tmp.path());
  // Recorded before the layer appears: whoever finds it finds its size too.
  record_verified_blob(home, hex, blob_st, used);
  if (::rename(tmp.path().c_str(), final_path.c_str()) != 0) {
    throw_errno(ErrorKind::Storage, "rename " + tmp.path() + " to " + final_path);
  }
  tmp.release();
  return used;
}

}  // namespace

std::vector<std::string> ensure_overlay_layers(const std::string& home, const image::LocalImage& img,
                                               uint32_t uid_offset) {
  if (uid_offset > std::numeric_limits<uint32_t>::max() - kBoxIds) {
    throw Error(ErrorKind::InvalidArgument,
                "uid offset " + std::to_string(uid_offset) + " leaves no room for 65536 ids");
  }
  // Before anything is unpacked: one overlay mount takes so many (jail.cpp).
  if (img.layers.size() > kMaxOverlayLayers) {
    throw Error(ErrorKind::Image, "image " + img.layout_dir + " has " + std::to_string(img.layers.size()) +
                                      " layers; the jail engine mounts at most " + std::to_string(kMaxOverlayLayers));
  }
  std::string dir = home + "/images/layers";
  std::vector<std::string> out;
  // One budget for all the image's layers, as the vm engine's disk image has.
  uint64_t max = image::max_image_bytes(), used = 0;
  auto charge = [&](uint64_t bytes, const image::Layer& layer) {
    used += bytes;
    if (used > max) {
      throw Error(ErrorKind::Image, "image " + img.layout_dir + ": its layers up to " + layer.digest + " take " +
                                        std::to_string(used) + " bytes unpacked, over the " + std::to_string(max) +
                                        "-byte image size limit (BOXLITE_MAX_IMAGE_BYTES)");
    }
  };
  for (const auto& layer : img.layers) {
    std::string hex = digest_hex(layer.digest, "layer", img);
    std::string name = hex + "-" + std::to_string(uid_offset);
    std::string final_path = dir + "/" + name;
    std::optional<uint64_t> bytes;
    if (path_exists(final_path)) {  // complete when present: it only appears by rename
      bytes = check_cached_blob(home, hex, layer);
    } else {
      make_dirs(dir);
      make_dirs(home + "/locks");
      FileLock lock(home + "/locks/layer-" + name + ".lock");
      if (path_exists(final_path)) {
        bytes = check_cached_blob(home, hex, layer);
      } else {
        bytes = build_overlay_layer(home, layer, uid_offset, dir, hex, final_path, max - used);
      }
    }
    charge(bytes.value_or(0), layer);  // unrecorded (a cache from before): not counted
    out.push_back(final_path);
  }
  // overlayfs refuses a lowerdir given twice (ELOOP). The upper copy of a repeated
  // layer re-adds and re-hides all the lower copy does, so only the upper one stays.
  std::vector<std::string> unique;
  for (size_t i = 0; i < out.size(); ++i) {
    if (std::find(out.begin() + static_cast<std::ptrdiff_t>(i) + 1, out.end(), out[i]) == out.end())
      unique.push_back(out[i]);
  }
  // overlayfs ignores an opaque lower root, so a layer that replaces the whole tree
  // hides the ones below by leaving them out.
  for (size_t i = unique.size(); i-- > 1;) {
    if (has_opaque_root(unique[i])) {
      unique.erase(unique.begin(), unique.begin() + static_cast<std::ptrdiff_t>(i));
      break;
    }
  }
  return unique;
}

std::string ensure_base_ext4(const std::string& home, const image::LocalImage& img) {
  std::string hex = manifest_hex(img);
  std::string dir = home + "/images/disk-images";
  std::string final_path = dir + "/" + hex + ".ext4";
  auto check_layers = [&] {
    for (const auto& layer : img.layers) check_cached_blob(home, digest_hex(layer.digest, "layer", img), layer);
  };
  if (path_exists(final_path)) {  // complete: it only appears by rename
    check_layers();
    return final_path;
  }
  make_dirs(dir);
  make_dirs(home + "/locks");
  make_dirs(home + "/tmp");
  FileLock lock(home + "/locks/image-" + hex + ".lock");
  if (path_exists(final_path)) {  // built while we waited for the lock
    check_layers();
    return final_path;
  }
  build_base(home, img, hex, final_path);
  return final_path;
}

void create_overlay(const std::string& base, const std::string& overlay, uint64_t size_bytes) {
  struct stat st;
  if (::stat(base.c_str(), &st) != 0) throw_errno(ErrorKind::Storage, "overlay base image " + base);
  // qemu-img resolves a relative backing path against the overlay's directory.
  std::string abs_base = std::filesystem::absolute(base).lexically_normal().string();
  PendingFile tmp(overlay + ".tmp-" + random_hex(4));
  std::vector<std::string> argv = {
      find_tool("qemu-img", "qemu-utils"), "create", "-q", "-f", "qcow2", "-F", "raw", "-b", abs_base, tmp.path()};
  if (size_bytes > static_cast<uint64_t>(st.st_size)) argv.push_back(std::to_string(size_bytes));
  RunResult r = run_tool(argv);
  if (!r.ok()) storage_fail("qemu-img create " + overlay + " (backing " + abs_base + ") failed: " + tool_failure(r));
  if (::rename(tmp.path().c_str(), overlay.c_str()) != 0)
    throw_errno(ErrorKind::Storage, "rename " + tmp.path() + " to " + overlay);
  tmp.commit();
}

}  // namespace boxlite::rootfs

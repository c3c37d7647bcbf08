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

#include "common/error.hpp"
#include "common/fd.hpp"
#include "common/io.hpp"
#include "common/process.hpp"
#include "image/unpack.hpp"

namespace boxlite::rootfs {

namespace {

constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kFsBlock = 4096;

[[noreturn]] void storage_fail(const std::string& msg) { throw Error(ErrorCode::Storage, msg); }

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
    if (!::mkdtemp(tmpl.data())) throw_errno(ErrorCode::Storage, "create temp dir in " + parent);
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
    if (!fd_) throw_errno(ErrorCode::Storage, "open lock file " + path);
    while (::flock(fd_.get(), LOCK_EX) != 0) {
      if (errno != EINTR) throw_errno(ErrorCode::Storage, "lock " + path);
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
  bool ok = d.starts_with("sha256:") && d.size() == 71 &&
            d.find_first_not_of("0123456789abcdef", 7) == std::string::npos;
  if (!ok) throw Error(ErrorCode::Image, "malformed " + what + " digest '" + d + "' for image " + img.layout_dir);
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
  if (!fd) throw_errno(ErrorCode::Storage, "create " + path);
  if (::ftruncate(fd.get(), static_cast<off_t>(size)) != 0) throw_errno(ErrorCode::Storage, "size " + path);
}

void run_mkfs(const std::string& tree, const std::string& file, uint64_t size, const std::string& digest) {
  std::string mkfs = find_tool("mkfs.ext4", "e2fsprogs");
  RunResult r = run_tool({mkfs, "-q", "-F", "-L", "rootfs",
                          // 4 KiB blocks even when small: the guest grows this file system
                          // online to disk_size_gb, and 1 KiB blocks make that 4x the work.
                          "-b", "4096", "-E", "root_owner=0:0", "-d", tree, file,
                          std::to_string(size / kMiB) + "M"});
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

void build_base(const std::string& home, const image::LocalImage& img, const std::string& hex, const std::string& final_path) {
  for (const auto& layer : img.layers) image::verify_blob(layer.blob_path, layer.digest);
  TempDir tree(home + "/tmp", "unpack-" + hex.substr(0, 12));
  // mkdtemp makes 0700; mkfs copies the mode to the guest's "/".
  if (::chmod(tree.path().c_str(), 0755) != 0) throw_errno(ErrorCode::Storage, "chmod " + tree.path());
  uint64_t budget = image::max_image_bytes();  // one budget for all layers together
  for (const auto& layer : img.layers) budget -= image::apply_layer(tree.path(), layer.blob_path, budget).bytes;

  uint64_t size = ext4_size_for(tree_bytes(tree.path()));
  std::string dir = home + "/images/disk-images";
  PendingFile out(dir + "/." + hex + ".ext4.tmp-" + random_hex(4));
  make_sparse_file(out.path(), size);
  run_mkfs(tree.path(), out.path(), size, img.manifest_digest);
  // The json first: whoever sees the .ext4 also finds its metadata.
  write_file_atomic(dir + "/" + hex + ".json", metadata_json(img, size));
  if (::rename(out.path().c_str(), final_path.c_str()) != 0) {
    throw_errno(ErrorCode::Storage, "rename " + out.path() + " to " + final_path);
  }
  out.commit();
}

constexpr uint32_t kBoxIds = 65536;

bool has_opaque_root(const std::string& dir) {
  char v = 0;
  return ::lgetxattr(dir.c_str(), "trusted.overlay.opaque", &v, 1) == 1 && v == 'y';
}

void build_overlay_layer(const image::Layer& layer, uint32_t offset, const std::string& dir, const std::string& hex,
                         const std::string& final_path) {
  if (::geteuid() != 0) {  // before hashing a possibly large blob for nothing
    throw Error(ErrorCode::Unsupported, "cannot prepare layer " + layer.digest + " owned by uid " + std::to_string(offset) +
                                            "+: the jail engine needs root to prepare shifted layers");
  }
  image::verify_blob(layer.blob_path, layer.digest);
  // In the cache directory itself, so that the rename stays within one filesystem.
  TempDir tmp(dir, ".tmp-" + hex.substr(0, 12) + "-" + std::to_string(offset));
  image::extract_layer_for_overlay(tmp.path(), layer.blob_path, {offset, offset, image::max_image_bytes()});
  UniqueFd root(::open(tmp.path().c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!root) throw_errno(ErrorCode::Storage, "open " + tmp.path());
  // Whatever the tar said about "./": the box's root-owned, world-searchable layer root.
  if (::fchown(root.get(), offset, offset) != 0) throw_errno(ErrorCode::Storage, "chown " + tmp.path());
  if (::fchmod(root.get(), 0755) != 0) throw_errno(ErrorCode::Storage, "chmod " + tmp.path());
  // Durable before it is published: a crash must not leave a half-written layer that
  // looks complete.
  if (::syncfs(root.get()) != 0) throw_errno(ErrorCode::Storage, "sync " + tmp.path());
  if (::rename(tmp.path().c_str(), final_path.c_str()) != 0) {
    throw_errno(ErrorCode::Storage, "rename " + tmp.path() + " to " + final_path);
  }
  tmp.release();
}

}  // namespace

std::vector<std::string> ensure_overlay_layers(const std::string& home, const image::LocalImage& img, uint32_t uid_offset) {
  if (uid_offset > std::numeric_limits<uint32_t>::max() - kBoxIds) {
    throw Error(ErrorCode::InvalidArgument, "uid offset " + std::to_string(uid_offset) + " leaves no room for 65536 ids");
  }
  std::string dir = home + "/images/layers";
  std::vector<std::string> out;
  for (const auto& layer : img.layers) {
    std::string hex = digest_hex(layer.digest, "layer", img);
    std::string name = hex + "-" + std::to_string(uid_offset);
    std::string final_path = dir + "/" + name;
    if (!path_exists(final_path)) {  // complete when present: it only appears by rename
      make_dirs(dir);
      make_dirs(home + "/locks");
      FileLock lock(home + "/locks/layer-" + name + ".lock");
      if (!path_exists(final_path)) build_overlay_layer(layer, uid_offset, dir, hex, final_path);
    }
    out.push_back(final_path);
  }
  // overlayfs refuses a lowerdir given twice (ELOOP). The upper copy of a repeated
  // layer re-adds and re-hides all the lower copy does, so only the upper one stays.
  std::vector<std::string> unique;
  for (size_t i = 0; i < out.size(); ++i) {
    if (std::find(out.begin() + static_cast<std::ptrdiff_t>(i) + 1, out.end(), out[i]) == out.end()) unique.push_back(out[i]);
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
  if (path_exists(final_path)) return final_path;  // complete: it only appears by rename
  make_dirs(dir);
  make_dirs(home + "/locks");
  make_dirs(home + "/tmp");
  FileLock lock(home + "/locks/image-" + hex + ".lock");
  if (path_exists(final_path)) return final_path;  // built while we waited for the lock
  build_base(home, img, hex, final_path);
  return final_path;
}

void create_overlay(const std::string& base, const std::string& overlay, uint64_t size_bytes) {
  struct stat st;
  if (::stat(base.c_str(), &st) != 0) throw_errno(ErrorCode::Storage, "overlay base image " + base);
  // qemu-img resolves a relative backing path against the overlay's directory.
  std::string abs_base = std::filesystem::absolute(base).lexically_normal().string();
  PendingFile tmp(overlay + ".tmp-" + random_hex(4));
  std::vector<std::string> argv = {find_tool("qemu-img", "qemu-utils"), "create", "-q", "-f", "qcow2",
                                   "-F", "raw", "-b", abs_base, tmp.path()};
  if (size_bytes > static_cast<uint64_t>(st.st_size)) argv.push_back(std::to_string(size_bytes));
  RunResult r = run_tool(argv);
  if (!r.ok()) storage_fail("qemu-img create " + overlay + " (backing " + abs_base + ") failed: " + tool_failure(r));
  if (::rename(tmp.path().c_str(), overlay.c_str()) != 0) throw_errno(ErrorCode::Storage, "rename " + tmp.path() + " to " + overlay);
  tmp.commit();
}

}  // namespace boxlite::rootfs

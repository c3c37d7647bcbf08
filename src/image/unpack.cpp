#include "image/unpack.hpp"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "common/error.hpp"
#include "common/fd.hpp"
#include "image/safe_fs.hpp"

namespace boxlite::image {

namespace {

using detail::Components;

constexpr int64_t kMaxEntryBytes = int64_t{64} << 30;
constexpr size_t kMaxPathBytes = 4096;
constexpr std::string_view kWhiteoutPrefix = ".wh.";
constexpr std::string_view kOpaqueMarker = ".wh..wh..opq";
constexpr const char* kOverlayOpaqueXattr = "trusted.overlay.opaque";
// Highest id a box sees (its user namespace maps 0..65535).
constexpr uint32_t kMaxBoxId = 65535;

[[noreturn]] void fail(const std::string& msg) { throw Error(ErrorCode::Image, msg); }

struct ArchiveReadDeleter {
  void operator()(archive* a) const { archive_read_free(a); }
};
using ArchiveReader = std::unique_ptr<archive, ArchiveReadDeleter>;

// Paths may not be convertible to the current locale; the UTF-8 form is then used.
std::string entry_path(archive_entry* e) {
  const char* p = archive_entry_pathname(e);
  if (!p) p = archive_entry_pathname_utf8(e);
  if (!p) fail("entry without a usable path name");
  return p;
}

const char* entry_symlink(archive_entry* e) {
  const char* t = archive_entry_symlink(e);
  return t ? t : archive_entry_symlink_utf8(e);
}

const char* entry_hardlink(archive_entry* e) {
  const char* t = archive_entry_hardlink(e);
  return t ? t : archive_entry_hardlink_utf8(e);
}

// Error messages quote entry names; keep hostile 4 KiB names from flooding them.
std::string shorten(const std::string& s) { return s.size() <= 256 ? s : s.substr(0, 256) + "..."; }

void check_link_target(const char* target) {
  if (!target) fail("link entry without a target");
  size_t len = std::strlen(target);
  if (len > kMaxPathBytes) fail("link target is " + std::to_string(len) + " bytes, over the 4096-byte limit");
}

struct EntryMeta {
  mode_t mode = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  timespec times[2]{};  // atime, mtime as utimensat wants them
};

EntryMeta entry_meta(archive_entry* e) {
  EntryMeta m;
  m.mode = archive_entry_perm(e) & 07777;
  int64_t uid = archive_entry_uid(e), gid = archive_entry_gid(e);
  // -1 would mean "unchanged" to chown; refuse it and anything not a 32-bit id.
  if (uid < 0 || uid >= 0xffffffffLL || gid < 0 || gid >= 0xffffffffLL) {
    fail("owner " + std::to_string(uid) + ":" + std::to_string(gid) + " out of range");
  }
  m.uid = static_cast<uid_t>(uid);
  m.gid = static_cast<gid_t>(gid);
  if (archive_entry_mtime_is_set(e)) {
    m.times[1] = {archive_entry_mtime(e), archive_entry_mtime_nsec(e)};
  } else {
    m.times[1].tv_nsec = UTIME_NOW;
  }
  m.times[0] = archive_entry_atime_is_set(e) ? timespec{archive_entry_atime(e), archive_entry_atime_nsec(e)} : m.times[1];
  return m;
}

void pwrite_all(int fd, const char* p, size_t len, off_t off) {
  while (len > 0) {
    ssize_t n = ::pwrite(fd, p, len, off);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_errno(ErrorCode::Image, "write");
    }
    p += n;
    off += n;
    len -= static_cast<size_t>(n);
  }
}

// Applies one layer. State that spans entries: which paths this layer wrote (so its
// own whiteouts and opaque markers spare them) and directory metadata, applied at
// the end so that creating children does not disturb mtimes or trip over modes.
class LayerApplier {
 public:
  // overlay: write overlayfs lowerdir format with shifted owners instead of applying
  // whiteouts (see extract_layer_for_overlay).
  LayerApplier(const std::string& root_dir, const std::string& layer_path, std::optional<OverlayOptions> overlay = {})
      : layer_(layer_path), overlay_(overlay) {
    root_ = UniqueFd(::open(root_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!root_) throw_errno(ErrorCode::Image, "open unpack root " + root_dir);
    if (overlay_) {
      if (!detail::list_dir(root_.get()).empty()) {
        throw Error(ErrorCode::InvalidArgument, "overlay layer directory " + root_dir + " is not empty");
      }
      implicit_owner_ = detail::Owner{overlay_->uid_offset, overlay_->gid_offset};
    }
    layer_fd_ = UniqueFd(::open(layer_path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!layer_fd_) throw_errno(ErrorCode::Image, "open layer " + layer_path);
    reader_.reset(archive_read_new());
    if (!reader_) fail("libarchive: out of memory");
    // Only the compressions OCI/Docker layers use; filter_all would also enable
    // decoders that run external programs (lrzip, lzop, grzip) on hostile input.
    archive_read_support_filter_gzip(reader_.get());
    archive_read_support_filter_zstd(reader_.get());
    archive_read_support_filter_xz(reader_.get());
    archive_read_support_format_tar(reader_.get());
    archive_read_support_format_empty(reader_.get());
    if (archive_read_open_fd(reader_.get(), layer_fd_.get(), 1 << 16) != ARCHIVE_OK) archive_fail("open");
  }

  UnpackStats run() {
    for (;;) {
      archive_entry* e = nullptr;
      int r = archive_read_next_header(reader_.get(), &e);
      if (r == ARCHIVE_EOF) break;
      if (r != ARCHIVE_OK && r != ARCHIVE_WARN) archive_fail("read next entry");
      std::string raw = entry_path(e);
      try {
        apply_entry(e, raw);
      } catch (const Error& err) {
        fail("layer " + layer_ + ": entry '" + shorten(raw) + "': " + err.what());
      }
    }
    try {
      finish_dirs();
    } catch (const Error& err) {
      fail("layer " + layer_ + ": " + err.what());
    }
    return stats_;
  }

 private:
  [[noreturn]] void archive_fail(const std::string& what) {
    const char* msg = archive_error_string(reader_.get());
    fail("layer " + layer_ + ": " + what + ": " + (msg ? msg : "unknown libarchive error"));
  }

  void apply_entry(archive_entry* e, const std::string& raw) {
    if (raw.size() > kMaxPathBytes) fail("path is " + std::to_string(raw.size()) + " bytes, over the 4096-byte limit");
    Components path = detail::clean_path(raw);
    mode_t type = archive_entry_filetype(e);
    if (path.empty()) {  // "./": the root itself; only its metadata matters
      if (type == AE_IFDIR) record_dir(path, meta(e));
      return;
    }
    if (std::string_view(path.back()).starts_with(kWhiteoutPrefix)) {
      return overlay_ ? make_whiteout(path, e) : apply_whiteout(path);
    }
    if (const char* target = entry_hardlink(e)) return make_hardlink(path, target);
    switch (type) {
      case AE_IFREG: return write_file(path, e);
      case AE_IFDIR: return make_dir(path, meta(e));
      case AE_IFLNK: return make_symlink(path, e);
      case AE_IFCHR:
      case AE_IFBLK:
      case AE_IFIFO:
      case AE_IFSOCK:
        // Device nodes are the guest's business (devtmpfs); a node from an image
        // could expose host devices if the tree were ever used on the host.
        skipped_.insert(detail::join_path(path, path.size()));
        ++stats_.skipped_devices;
        return;
      default:
        fail("unsupported entry type " + std::to_string(type));
    }
  }

  // The tar's owner, shifted and range-checked in overlay mode.
  EntryMeta meta(archive_entry* e) const {
    EntryMeta m = entry_meta(e);
    if (!overlay_) return m;
    if (m.uid > kMaxBoxId || m.gid > kMaxBoxId) {
      fail("owner " + std::to_string(m.uid) + ":" + std::to_string(m.gid) +
           " is outside the box's id range 0..65535 and cannot be shifted");
    }
    m.uid += overlay_->uid_offset;
    m.gid += overlay_->gid_offset;
    return m;
  }

  void mark_written(const Components& path) {
    for (size_t i = 1; i <= path.size(); ++i) written_.insert(detail::join_path(path, i));
    if (!whiteouts_.empty()) whiteouts_.erase(detail::join_path(path, path.size()));
  }

  // The directory named by path's first `count` components, created as needed (in
  // overlay mode owned by the offsets, and replacing whiteouts of this layer).
  UniqueFd open_dir(const Components& path, size_t count) {
    if (overlay_) revive_whiteouts(path, count);
    const detail::Owner* owner = implicit_owner_ ? &*implicit_owner_ : nullptr;
    return detail::open_dir_in_root(root_.get(), path, count, /*create=*/true, owner);
  }

  // The directory holding path's last component, created as needed.
  UniqueFd parent_of(const Components& path) { return open_dir(path, path.size() - 1); }

  void apply_owner(int dir_fd, const std::string& name, const EntryMeta& m) {
    if (!as_root_) return;  // unprivileged: files stay ours (rootless builds)
    if (::fchownat(dir_fd, name.c_str(), m.uid, m.gid, AT_SYMLINK_NOFOLLOW) != 0) throw_errno(ErrorCode::Image, "chown");
  }

  void write_file(const Components& path, archive_entry* e) {
    int64_t size = archive_entry_size(e);
    if (size > kMaxEntryBytes) fail("file is " + std::to_string(size) + " bytes, over the 64 GiB limit");
    EntryMeta m = meta(e);
    UniqueFd parent = parent_of(path);
    const std::string& name = path.back();
    // Always a fresh inode: writing into an existing file could write through a
    // hardlink shared with another path.
    detail::remove_at(parent.get(), name);
    UniqueFd fd(::openat(parent.get(), name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!fd) throw_errno(ErrorCode::Image, "create file");
    copy_data(fd.get(), size);
    // chown before chmod: chown clears setuid/setgid bits.
    if (as_root_ && ::fchown(fd.get(), m.uid, m.gid) != 0) throw_errno(ErrorCode::Image, "chown");
    if (::fchmod(fd.get(), m.mode) != 0) throw_errno(ErrorCode::Image, "chmod");
    if (::futimens(fd.get(), m.times) != 0) throw_errno(ErrorCode::Image, "set times");
    mark_written(path);
    ++stats_.files;
    stats_.bytes += static_cast<uint64_t>(size);
  }

  // Copies the entry's data; sparse entries come as blocks at offsets, so holes stay holes.
  void copy_data(int fd, int64_t size) {
    const void* buf = nullptr;
    size_t len = 0;
    la_int64_t off = 0;
    for (;;) {
      int r = archive_read_data_block(reader_.get(), &buf, &len, &off);
      if (r == ARCHIVE_EOF) break;
      if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
        const char* msg = archive_error_string(reader_.get());
        fail(std::string("read data: ") + (msg ? msg : "unknown libarchive error"));
      }
      if (off < 0 || off + static_cast<int64_t>(len) > size) fail("data beyond the entry's declared size");
      pwrite_all(fd, static_cast<const char*>(buf), len, off);
    }
    if (::ftruncate(fd, size) != 0) throw_errno(ErrorCode::Image, "truncate");
  }

  void make_dir(const Components& path, const EntryMeta& m) {
    UniqueFd parent = parent_of(path);
    const std::string& name = path.back();
    struct stat st;
    bool exists = ::fstatat(parent.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
    // In overlay mode the only character devices are this layer's whiteouts: the
    // directory replacing one must still hide the lower layers' entry.
    bool over_whiteout = false;
    if (exists && !S_ISDIR(st.st_mode)) {
      over_whiteout = overlay_ && S_ISCHR(st.st_mode);
      detail::remove_at(parent.get(), name);
      exists = false;
    }
    // Created 0700 and given its mode at the end, so an unprivileged unpack can
    // still fill a directory the image marks read-only.
    if (!exists && ::mkdirat(parent.get(), name.c_str(), 0700) != 0) throw_errno(ErrorCode::Image, "mkdir");
    if (over_whiteout) set_opaque_at(parent.get(), name);
    apply_owner(parent.get(), name, m);
    record_dir(path, m);
    mark_written(path);
    ++stats_.dirs;
  }

  void record_dir(const Components& path, const EntryMeta& m) {
    std::string key = detail::join_path(path, path.size());
    auto [it, inserted] = dir_index_.emplace(key, dirs_.size());
    if (inserted) {
      dirs_.push_back({path, m});
    } else {
      dirs_[it->second].meta = m;  // the last entry for a directory wins
    }
  }

  void make_symlink(const Components& path, archive_entry* e) {
    const char* target = entry_symlink(e);
    check_link_target(target);
    EntryMeta m = meta(e);
    UniqueFd parent = parent_of(path);
    const std::string& name = path.back();
    detail::remove_at(parent.get(), name);
    // The target is stored verbatim: it is only ever interpreted inside the box.
    if (::symlinkat(target, parent.get(), name.c_str()) != 0) throw_errno(ErrorCode::Image, "symlink");
    apply_owner(parent.get(), name, m);
    if (::utimensat(parent.get(), name.c_str(), m.times, AT_SYMLINK_NOFOLLOW) != 0) throw_errno(ErrorCode::Image, "set times");
    mark_written(path);
    ++stats_.symlinks;
  }

  void make_hardlink(const Components& path, const char* raw_target) {
    check_link_target(raw_target);
    Components target = detail::clean_path(raw_target);
    if (target.empty()) fail("hardlink to the root directory");
    std::string target_key = detail::join_path(target, target.size());
    if (skipped_.count(target_key)) {  // a link to a device node we skipped
      ++stats_.skipped_devices;
      return;
    }
    UniqueFd tparent = detail::open_dir_in_root(root_.get(), target, target.size() - 1, /*create=*/false);
    struct stat tst;
    if (!tparent || ::fstatat(tparent.get(), target.back().c_str(), &tst, AT_SYMLINK_NOFOLLOW) != 0) {
      fail("hardlink target '" + shorten(raw_target) + "' not found inside the image root");
    }
    if (S_ISDIR(tst.st_mode)) fail("hardlink target '" + shorten(raw_target) + "' is a directory");
    // Linking a whiteout would white out a second name.
    if (overlay_ && S_ISCHR(tst.st_mode)) fail("hardlink target '" + shorten(raw_target) + "' is a whiteout");
    UniqueFd parent = parent_of(path);
    const std::string& name = path.back();
    struct stat st;
    if (::fstatat(parent.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
      if (st.st_dev == tst.st_dev && st.st_ino == tst.st_ino) {  // already that inode
        ++stats_.hardlinks;
        return;
      }
      detail::remove_at(parent.get(), name);
    }
    // flags 0: a symlink target is linked itself, never followed.
    if (::linkat(tparent.get(), target.back().c_str(), parent.get(), name.c_str(), 0) != 0) {
      throw_errno(ErrorCode::Image, "link to '" + shorten(raw_target) + "'");
    }
    mark_written(path);
    ++stats_.hardlinks;
  }

  void apply_whiteout(const Components& path) {
    std::string hidden = path.back().substr(kWhiteoutPrefix.size());
    Components dir(path.begin(), path.end() - 1);
    ++stats_.whiteouts;
    if (path.back() == kOpaqueMarker) return clear_lower(dir);
    // Other ".wh..wh.*" names are aufs bookkeeping, not whiteouts.
    if (std::string_view(hidden).starts_with(kWhiteoutPrefix)) return;
    if (hidden.empty() || hidden == "." || hidden == "..") fail("invalid whiteout name");
    Components target = dir;
    target.push_back(hidden);
    UniqueFd parent = detail::open_dir_in_root(root_.get(), dir, dir.size(), /*create=*/false);
    if (!parent) return;
    std::string key = detail::join_path(target, target.size());
    if (!written_.count(key)) return detail::remove_at(parent.get(), hidden);
    // Whiteouts only hide lower layers: what this layer wrote under that name stays
    // (and for a directory, only the lower layers' part of it goes).
    if (UniqueFd sub = detail::open_subdir(parent.get(), hidden)) clear_lower_at(sub.get(), key);
  }

  // Overlay mode: ".wh.NAME" becomes a whiteout device, ".wh..wh..opq" an xattr.
  void make_whiteout(const Components& path, archive_entry* e) {
    Components dir(path.begin(), path.end() - 1);
    ++stats_.whiteouts;
    if (path.back() == kOpaqueMarker) return make_opaque(dir);
    std::string hidden = path.back().substr(kWhiteoutPrefix.size());
    if (std::string_view(hidden).starts_with(kWhiteoutPrefix)) return;  // aufs bookkeeping
    if (hidden.empty() || hidden == "." || hidden == "..") fail("invalid whiteout name");
    EntryMeta m = meta(e);
    // Created even where this layer has no such directory yet: the lower layers may.
    UniqueFd parent = open_dir(dir, dir.size());
    struct stat st;
    if (::fstatat(parent.get(), hidden.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
      // This layer wrote NAME (or already whited it out): a file or symlink hides the
      // lower NAME by itself; a directory would merge with it unless opaque.
      if (S_ISDIR(st.st_mode)) set_opaque_at(parent.get(), hidden);
      return;
    }
    if (errno != ENOENT) throw_errno(ErrorCode::Image, "stat " + hidden);
    if (::mknodat(parent.get(), hidden.c_str(), S_IFCHR, ::makedev(0, 0)) != 0) {
      throw_errno(ErrorCode::Image, "create whiteout " + hidden);
    }
    apply_owner(parent.get(), hidden, m);
    if (::utimensat(parent.get(), hidden.c_str(), m.times, AT_SYMLINK_NOFOLLOW) != 0) {
      throw_errno(ErrorCode::Image, "set times of whiteout " + hidden);
    }
    Components target = dir;
    target.push_back(hidden);
    whiteouts_.insert(detail::join_path(target, target.size()));
  }

  void make_opaque(const Components& dir) {
    if (dir.empty()) return set_opaque_fd(root_.get(), "the layer root");
    UniqueFd fd = open_dir(dir, dir.size());
    UniqueFd rd(::openat(fd.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!rd) throw_errno(ErrorCode::Image, "open directory " + detail::join_path(dir, dir.size()));
    set_opaque_fd(rd.get(), detail::join_path(dir, dir.size()));
  }

  // name in dir_fd must be a directory (checked: never follows a symlink).
  void set_opaque_at(int dir_fd, const std::string& name) {
    UniqueFd fd(::openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!fd) throw_errno(ErrorCode::Image, "open directory " + name);
    set_opaque_fd(fd.get(), name);
  }

  void set_opaque_fd(int fd, const std::string& what) {
    if (::fsetxattr(fd, kOverlayOpaqueXattr, "y", 1, 0) != 0) {
      throw_errno(ErrorCode::Image, std::string("set ") + kOverlayOpaqueXattr + " on " + what);
    }
  }

  // A path under a name this layer whited out ("a/.wh.b" then "b/c"): that name
  // becomes a directory again, opaque so that the lower layers' one stays hidden.
  void revive_whiteouts(const Components& path, size_t count) {
    if (whiteouts_.empty()) return;
    for (size_t i = 1; i <= count; ++i) {
      std::string key = detail::join_path(path, i);
      if (!whiteouts_.erase(key)) continue;
      const detail::Owner& o = *implicit_owner_;
      UniqueFd parent = detail::open_dir_in_root(root_.get(), path, i - 1, /*create=*/true, &o);
      const std::string& name = path[i - 1];
      struct stat st;
      if (::fstatat(parent.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISCHR(st.st_mode)) {
        if (::unlinkat(parent.get(), name.c_str(), 0) != 0) throw_errno(ErrorCode::Image, "remove whiteout " + key);
        if (::mkdirat(parent.get(), name.c_str(), 0755) != 0) throw_errno(ErrorCode::Image, "mkdir " + key);
        if (::fchownat(parent.get(), name.c_str(), o.uid, o.gid, AT_SYMLINK_NOFOLLOW) != 0) {
          throw_errno(ErrorCode::Image, "chown " + key);
        }
        set_opaque_at(parent.get(), name);
      }
    }
  }

  // Removes everything under dir that this layer did not write itself.
  void clear_lower(const Components& dir) {
    UniqueFd fd = detail::open_dir_in_root(root_.get(), dir, dir.size(), /*create=*/false);
    if (!fd) return;
    clear_lower_at(fd.get(), detail::join_path(dir, dir.size()));
  }

  void clear_lower_at(int dir_fd, const std::string& key) {
    for (const auto& name : detail::list_dir(dir_fd)) {
      std::string child = key.empty() ? name : key + "/" + name;
      if (!written_.count(child)) {
        detail::remove_at(dir_fd, name);
      } else if (UniqueFd sub = detail::open_subdir(dir_fd, name)) {
        clear_lower_at(sub.get(), child);  // depth bounded by the written paths' depth
      }
    }
  }

  // Directory modes and times, children before parents.
  void finish_dirs() {
    for (auto it = dirs_.rbegin(); it != dirs_.rend(); ++it) {
      const Components& path = it->path;
      const EntryMeta& m = it->meta;
      if (path.empty()) {
        if (as_root_ && ::fchown(root_.get(), m.uid, m.gid) != 0) throw_errno(ErrorCode::Image, "chown root directory");
        if (::fchmod(root_.get(), m.mode) != 0) throw_errno(ErrorCode::Image, "chmod root directory");
        if (::futimens(root_.get(), m.times) != 0) throw_errno(ErrorCode::Image, "set times of root directory");
        continue;
      }
      UniqueFd parent;
      try {
        parent = detail::open_dir_in_root(root_.get(), path, path.size() - 1, /*create=*/false);
      } catch (const Error&) {
        continue;  // a later entry turned an ancestor into a file: the directory is gone
      }
      struct stat st;
      const char* name = path.back().c_str();
      // Replaced by a later entry of another type, or removed: nothing to do.
      if (!parent || ::fstatat(parent.get(), name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode)) continue;
      std::string what = detail::join_path(path, path.size());
      // fchmodat follows symlinks, but the fstatat above saw a directory and this
      // layer is the only writer.
      if (::fchmodat(parent.get(), name, m.mode, 0) != 0) throw_errno(ErrorCode::Image, "chmod directory " + what);
      if (::utimensat(parent.get(), name, m.times, AT_SYMLINK_NOFOLLOW) != 0) {
        throw_errno(ErrorCode::Image, "set times of directory " + what);
      }
    }
  }

  struct DirMeta {
    Components path;
    EntryMeta meta;
  };

  std::string layer_;
  std::optional<OverlayOptions> overlay_;
  std::optional<detail::Owner> implicit_owner_;  // of directories made for paths (overlay mode)
  bool as_root_ = ::geteuid() == 0;
  UniqueFd root_, layer_fd_;
  ArchiveReader reader_;  // declared after layer_fd_: freed before the fd closes
  UnpackStats stats_;
  std::unordered_set<std::string> written_;  // this layer's paths and their ancestors
  std::unordered_set<std::string> skipped_;  // device nodes left out
  std::unordered_set<std::string> whiteouts_;  // whiteout devices made (overlay mode)
  std::vector<DirMeta> dirs_;
  std::unordered_map<std::string, size_t> dir_index_;
};

}  // namespace

UnpackStats apply_layer(const std::string& root_dir, const std::string& layer_path) {
  return LayerApplier(root_dir, layer_path).run();
}

UnpackStats extract_layer_for_overlay(const std::string& layer_dir, const std::string& layer_path,
                                      const OverlayOptions& opts) {
  if (::geteuid() != 0) {
    throw Error(ErrorCode::Unsupported, "cannot extract layer " + layer_path + " owned by uid " +
                                            std::to_string(opts.uid_offset) +
                                            "+: the jail engine needs root to prepare shifted layers");
  }
  // uid_t -1 means "unchanged" to chown: the shifted range must stay below it.
  constexpr uint32_t kMaxOffset = std::numeric_limits<uint32_t>::max() - kMaxBoxId - 1;
  if (opts.uid_offset > kMaxOffset || opts.gid_offset > kMaxOffset) {
    throw Error(ErrorCode::InvalidArgument, "id offsets " + std::to_string(opts.uid_offset) + "/" +
                                                std::to_string(opts.gid_offset) + " leave no room for 65536 ids");
  }
  return LayerApplier(layer_dir, layer_path, opts).run();
}

}  // namespace boxlite::image

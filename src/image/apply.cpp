#include "image/apply.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "common/error.hpp"
#include "common/fd.hpp"
#include "image/libarchive.hpp"
#include "image/safe_fs.hpp"

namespace boxlite::image::detail {

namespace {

constexpr int64_t kMaxEntryBytes = int64_t{64} << 30;
constexpr size_t kMaxPathBytes = 4096;
// What the applier may keep of the names a layer wrote (its paths and their
// ancestors, for whiteouts and opaque directories): legitimate images with a
// million files stay far below it.
constexpr uint64_t kMaxTrackedPathBytes = uint64_t{256} << 20;
constexpr std::string_view kWhiteoutPrefix = ".wh.";
constexpr std::string_view kOpaqueMarker = ".wh..wh..opq";
constexpr const char* kOverlayOpaqueXattr = "trusted.overlay.opaque";
// Highest id a box sees (its user namespace maps 0..65535).
constexpr uint32_t kMaxBoxId = 65535;

[[noreturn]] void fail(const std::string& msg) { throw Error(ErrorKind::Image, msg); }

// Paths may not be convertible to the current locale; the UTF-8 form is then used.
std::string path_of(archive_entry* e) {
  const char* p = la::archive_entry_pathname(e);
  if (!p) p = la::archive_entry_pathname_utf8(e);
  if (!p) fail("entry without a usable path name");
  return p;
}

const char* entry_symlink(archive_entry* e) {
  const char* t = la::archive_entry_symlink(e);
  return t ? t : la::archive_entry_symlink_utf8(e);
}

const char* hardlink_of(archive_entry* e) {
  const char* t = la::archive_entry_hardlink(e);
  return t ? t : la::archive_entry_hardlink_utf8(e);
}

// Error messages quote entry names; keep hostile 4 KiB names from flooding them.
std::string shorten_name(const std::string& s) { return s.size() <= 256 ? s : s.substr(0, 256) + "..."; }

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
  m.mode = la::archive_entry_perm(e) & 07777;
  int64_t uid = la::archive_entry_uid(e), gid = la::archive_entry_gid(e);
  // -1 would mean "unchanged" to chown; refuse it and anything not a 32-bit id.
  if (uid < 0 || uid >= 0xffffffffLL || gid < 0 || gid >= 0xffffffffLL) {
    fail("owner " + std::to_string(uid) + ":" + std::to_string(gid) + " out of range");
  }
  m.uid = static_cast<uid_t>(uid);
  m.gid = static_cast<gid_t>(gid);
  if (la::archive_entry_mtime_is_set(e)) {
    m.times[1] = {la::archive_entry_mtime(e), la::archive_entry_mtime_nsec(e)};
  } else {
    m.times[1].tv_nsec = UTIME_NOW;
  }
  m.times[0] = la::archive_entry_atime_is_set(e) ? timespec{la::archive_entry_atime(e), la::archive_entry_atime_nsec(e)}
                                                 : m.times[1];
  return m;
}

bool all_zero(const char* p, size_t len) { return len == 0 || (p[0] == 0 && std::memcmp(p, p + 1, len - 1) == 0); }

void pwrite_all(int fd, const char* p, size_t len, off_t off);

// Into a file just created: zeros are left unwritten, so whole blocks of them holes (as cp --sparse and
// tar -S make them), so that a file that is sparse where it comes from (a box's
// `truncate -s 2G`, which a tar stream carries as zeros) does not take its whole
// size on the host's disk.
void write_leaving_holes(int fd, const char* p, size_t len, off_t off) {
  constexpr off_t kBlock = 4096;
  size_t start = 0;  // of the run of data not yet written
  size_t i = 0;
  while (i < len) {
    // Up to the next block boundary of the file.
    size_t n = std::min(len - i, static_cast<size_t>(kBlock - (off + static_cast<off_t>(i)) % kBlock));
    if (all_zero(p + i, n)) {  // the new file reads as zeros there already
      if (i > start) pwrite_all(fd, p + start, i - start, off + static_cast<off_t>(start));
      start = i + n;
    }
    i += n;
  }
  if (len > start) pwrite_all(fd, p + start, len - start, off + static_cast<off_t>(start));
}

void pwrite_all(int fd, const char* p, size_t len, off_t off) {
  while (len > 0) {
    ssize_t n = ::pwrite(fd, p, len, off);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_errno(ErrorKind::Image, "write");
    }
    p += n;
    off += n;
    len -= static_cast<size_t>(n);
  }
}

// Applies one archive. State that spans entries: which paths this layer wrote (so
// its own whiteouts and opaque markers spare them) and directory metadata, applied
// at the end so that creating children does not disturb mtimes or trip over modes.
class LayerApplier {
 public:
  // mode.overlay: write overlayfs lowerdir format with shifted owners instead of
  // applying whiteouts (see extract_layer_for_overlay). mode.copy: place a copy
  // archive (see extract_copy_archive): no whiteouts, no owners, no replacing a
  // directory by a non-directory or the reverse.
  LayerApplier(UniqueFd root, archive* reader, std::string label, const ApplyMode& mode)
      : label_(std::move(label)),
        overlay_(mode.overlay),
        copy_(mode.copy),
        max_bytes_(mode.max_bytes),
        root_(std::move(root)),
        reader_(reader) {
    if (overlay_) implicit_owner_ = detail::Owner{overlay_->uid_offset, overlay_->gid_offset};
    // Copied files belong to whoever copies them (docker cp without -a): the owner
    // recorded in a box is meaningless on the host and the reverse.
    if (copy_) as_root_ = false;
  }

  UnpackStats run(archive_entry* first) {
    archive_entry* e = first;
    for (;;) {
      if (!e) {
        int r = la::archive_read_next_header(reader_, &e);
        if (r == ARCHIVE_EOF) break;
        if (r != ARCHIVE_OK && r != ARCHIVE_WARN) archive_fail("read next entry");
      }
      std::string raw = path_of(e);
      try {
        current_.clear();
        apply_entry(e, raw);
      } catch (const Error& err) {
        // A copy names where the entry was going; a layer, the entry.
        if (!current_.empty()) rethrow(err, current_ + ": " + err.what());
        rethrow(err, label_ + ": entry '" + shorten_name(raw) + "': " + err.what());
      }
      e = nullptr;
    }
    try {
      finish_dirs();
    } catch (const Error& err) {
      rethrow(err, label_ + ": " + err.what());
    }
    return stats_;
  }

 private:
  // Layers: every failure is an Image error. Copies: the codes raised on purpose
  // (AlreadyExists, ...) stand; the rest are I/O or input failures (Storage).
  [[noreturn]] void rethrow(const Error& err, const std::string& msg) const {
    if (!copy_) fail(msg);
    throw Error(err.kind() == ErrorKind::Image ? ErrorKind::Storage : err.kind(), msg);
  }

  [[noreturn]] void archive_fail(const std::string& what) const {
    std::string text = label_ + ": " + what + ": " + archive_error_text(reader_);
    if (copy_) throw Error(ErrorKind::Storage, text);
    fail(text);
  }

  // Every entry costs an inode and a block at least (unpack.hpp, kEntryCost).
  void charge_entry() {
    uint64_t used = stats_.budget_used();
    if (used > max_bytes_ || max_bytes_ - used < kEntryCost) {
      fail("unpacked entries would exceed the " + std::to_string(max_bytes_) +
           "-byte image size limit (BOXLITE_MAX_IMAGE_BYTES; every entry counts " + std::to_string(kEntryCost) +
           " bytes beside its data)");
    }
    ++stats_.entries;
  }

  void apply_entry(archive_entry* e, const std::string& raw) {
    if (raw.size() > kMaxPathBytes) fail("path is " + std::to_string(raw.size()) + " bytes, over the 4096-byte limit");
    charge_entry();
    Components path = copy_ ? copy_path(raw) : detail::clean_path(raw);
    if (copy_) {
      std::string rel = shorten_name(detail::join_path(path, path.size()));
      const std::string& root = copy_->root_display;
      current_ = rel.empty() ? root : root.ends_with('/') ? root + rel : root + "/" + rel;
    }
    mode_t type = la::archive_entry_filetype(e);
    if (path.empty()) {  // "./" (or a copy's top directory): the root itself; only its metadata matters
      if (copy_ && type != AE_IFDIR) fail("a non-directory entry for the copied directory itself");
      if (type == AE_IFDIR && (!copy_ || copy_->top_meta)) record_dir(path, meta(e));
      return;
    }
    if (!copy_ && std::string_view(path.back()).starts_with(kWhiteoutPrefix)) {
      return overlay_ ? make_whiteout(path, e) : apply_whiteout(path);
    }
    if (const char* target = hardlink_of(e)) return make_hardlink(path, target);
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
      default: fail("unsupported entry type " + std::to_string(type));
    }
  }

  // Copy mode: the archive path below the root. Everything must lie under the top
  // name: a hostile archive cannot name siblings of what was asked for.
  Components copy_path(const std::string& raw) {
    Components p = detail::clean_path(raw);
    if (p.empty() || p.front() != copy_->top) fail("outside the copied tree '" + shorten_name(copy_->top) + "'");
    if (!copy_->single_name.empty()) {
      // One file: anything more would be written beside it, outside the destination.
      if (single_done_ || p.size() != 1) fail("more than one entry in the archive of a single file");
      single_done_ = true;
      return {copy_->single_name};
    }
    p.erase(p.begin());
    return p;
  }

  // Copy mode: a hardlink target is an archive path too, mapped the same way (so it
  // lies inside the copied tree). A single file's archive has nothing to link to.
  Components copy_link_target(const char* raw_target) const {
    Components p = detail::clean_path(raw_target);
    if (!copy_->single_name.empty() || p.size() < 2 || p.front() != copy_->top) {
      fail("hardlink target '" + shorten_name(raw_target) + "' is not inside the copied tree");
    }
    p.erase(p.begin());
    return p;
  }

  // Copy mode: an existing `name` in dir_fd may be replaced by an entry of this kind?
  // Never a directory by a non-directory or the reverse (docker refuses both: the
  // one would delete a tree, the other is rarely meant); a non-directory only when
  // overwriting is on.
  void check_replace(int dir_fd, const std::string& name, bool entry_is_dir) const {
    if (!copy_) return;
    struct stat st;
    if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT) return;
      throw_errno(ErrorKind::Image, "stat " + shorten_name(name));
    }
    bool is_dir = S_ISDIR(st.st_mode);
    if (is_dir && !entry_is_dir)
      throw Error(ErrorKind::AlreadyExists, "cannot overwrite a directory with a non-directory");
    if (!is_dir && entry_is_dir)
      throw Error(ErrorKind::AlreadyExists, "cannot overwrite a non-directory with a directory");
    if (!is_dir && !copy_->overwrite) throw Error(ErrorKind::AlreadyExists, "already exists (overwrite is off)");
  }

  // The tar's owner, shifted and range-checked in overlay mode; in copy mode
  // without setuid/setgid when asked.
  EntryMeta meta(archive_entry* e) const {
    EntryMeta m = entry_meta(e);
    if (copy_ && copy_->strip_setid) m.mode &= ~mode_t{S_ISUID | S_ISGID};  // directories' too
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
    for (size_t i = 1; i <= path.size(); ++i) {
      auto [it, added] = written_.insert(detail::join_path(path, i));
      if (!added) continue;
      written_bytes_ += it->size();
      if (written_bytes_ > kMaxTrackedPathBytes) {
        fail("the layer's paths are too many or too deep: their names take over " +
             std::to_string(kMaxTrackedPathBytes >> 20) + " MiB");
      }
    }
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
    if (::fchownat(dir_fd, name.c_str(), m.uid, m.gid, AT_SYMLINK_NOFOLLOW) != 0)
      throw_errno(ErrorKind::Image, "chown");
  }

  void write_file(const Components& path, archive_entry* e) {
    int64_t size = la::archive_entry_size(e);
    if (size > kMaxEntryBytes) fail("file is " + std::to_string(size) + " bytes, over the 64 GiB limit");
    if (size >= 0 && static_cast<uint64_t>(size) > max_bytes_ - std::min(max_bytes_, stats_.budget_used())) {
      fail("unpacked files would exceed the " + std::to_string(max_bytes_) +
           "-byte image size limit (BOXLITE_MAX_IMAGE_BYTES; sparse files count at their full size)");
    }
    EntryMeta m = meta(e);
    UniqueFd parent = parent_of(path);
    const std::string& name = path.back();
    check_replace(parent.get(), name, false);
    // Always a fresh inode: writing into an existing file could write through a
    // hardlink shared with another path.
    detail::remove_at(parent.get(), name);
    UniqueFd fd(::openat(parent.get(), name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!fd) throw_errno(ErrorKind::Image, "create file");
    copy_data(fd.get(), size);
    // chown before chmod: chown clears setuid/setgid bits.
    if (as_root_ && ::fchown(fd.get(), m.uid, m.gid) != 0) throw_errno(ErrorKind::Image, "chown");
    if (::fchmod(fd.get(), m.mode) != 0) throw_errno(ErrorKind::Image, "chmod");
    if (::futimens(fd.get(), m.times) != 0) throw_errno(ErrorKind::Image, "set times");
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
      int r = la::archive_read_data_block(reader_, &buf, &len, &off);
      if (r == ARCHIVE_EOF) break;
      if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
        fail("read data: " + archive_error_text(reader_));
      }
      if (off < 0 || off + static_cast<int64_t>(len) > size) fail("data beyond the entry's declared size");
      write_leaving_holes(fd, static_cast<const char*>(buf), len, off);
    }
    if (::ftruncate(fd, size) != 0) throw_errno(ErrorKind::Image, "truncate");
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
      check_replace(parent.get(), name, true);
      over_whiteout = overlay_ && S_ISCHR(st.st_mode);
      detail::remove_at(parent.get(), name);
      exists = false;
    }
    // Created 0700 and given its mode at the end, so an unprivileged unpack can
    // still fill a directory the image marks read-only.
    if (!exists && ::mkdirat(parent.get(), name.c_str(), 0700) != 0) throw_errno(ErrorKind::Image, "mkdir");
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
    check_replace(parent.get(), name, false);
    detail::remove_at(parent.get(), name);
    // The target is stored verbatim: it is only ever interpreted inside the box.
    if (::symlinkat(target, parent.get(), name.c_str()) != 0) throw_errno(ErrorKind::Image, "symlink");
    apply_owner(parent.get(), name, m);
    if (::utimensat(parent.get(), name.c_str(), m.times, AT_SYMLINK_NOFOLLOW) != 0)
      throw_errno(ErrorKind::Image, "set times");
    mark_written(path);
    ++stats_.symlinks;
  }

  void make_hardlink(const Components& path, const char* raw_target) {
    check_link_target(raw_target);
    Components target = copy_ ? copy_link_target(raw_target) : detail::clean_path(raw_target);
    if (target.empty()) fail("hardlink to the root directory");
    std::string target_key = detail::join_path(target, target.size());
    if (skipped_.count(target_key)) {  // a link to a device node we skipped
      ++stats_.skipped_devices;
      return;
    }
    UniqueFd tparent = detail::open_dir_in_root(root_.get(), target, target.size() - 1, /*create=*/false);
    struct stat tst;
    if (!tparent || ::fstatat(tparent.get(), target.back().c_str(), &tst, AT_SYMLINK_NOFOLLOW) != 0) {
      fail("hardlink target '" + shorten_name(raw_target) + "' not found inside the image root");
    }
    if (S_ISDIR(tst.st_mode)) fail("hardlink target '" + shorten_name(raw_target) + "' is a directory");
    // Linking a whiteout would white out a second name.
    if (overlay_ && S_ISCHR(tst.st_mode)) fail("hardlink target '" + shorten_name(raw_target) + "' is a whiteout");
    UniqueFd parent = parent_of(path);
    const std::string& name = path.back();
    struct stat st;
    if (::fstatat(parent.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
      if (st.st_dev == tst.st_dev && st.st_ino == tst.st_ino) {  // already that inode
        ++stats_.hardlinks;
        return;
      }
      check_replace(parent.get(), name, false);
      detail::remove_at(parent.get(), name);
    }
    // flags 0: a symlink target is linked itself, never followed.
    if (::linkat(tparent.get(), target.back().c_str(), parent.get(), name.c_str(), 0) != 0) {
      throw_errno(ErrorKind::Image, "link to '" + shorten_name(raw_target) + "'");
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
    if (errno != ENOENT) throw_errno(ErrorKind::Image, "stat " + hidden);
    if (::mknodat(parent.get(), hidden.c_str(), S_IFCHR, ::makedev(0, 0)) != 0) {
      throw_errno(ErrorKind::Image, "create whiteout " + hidden);
    }
    apply_owner(parent.get(), hidden, m);
    if (::utimensat(parent.get(), hidden.c_str(), m.times, AT_SYMLINK_NOFOLLOW) != 0) {
      throw_errno(ErrorKind::Image, "set times of whiteout " + hidden);
    }
    Components target = dir;
    target.push_back(hidden);
    whiteouts_.insert(detail::join_path(target, target.size()));
  }

  void make_opaque(const Components& dir) {
    if (dir.empty()) return set_opaque_fd(root_.get(), "the layer root");
    UniqueFd fd = open_dir(dir, dir.size());
    UniqueFd rd(::openat(fd.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!rd) throw_errno(ErrorKind::Image, "open directory " + detail::join_path(dir, dir.size()));
    set_opaque_fd(rd.get(), detail::join_path(dir, dir.size()));
  }

  // name in dir_fd must be a directory (checked: never follows a symlink).
  void set_opaque_at(int dir_fd, const std::string& name) {
    UniqueFd fd(::openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!fd) throw_errno(ErrorKind::Image, "open directory " + name);
    set_opaque_fd(fd.get(), name);
  }

  void set_opaque_fd(int fd, const std::string& what) {
    if (::fsetxattr(fd, kOverlayOpaqueXattr, "y", 1, 0) != 0) {
      throw_errno(ErrorKind::Image, std::string("set ") + kOverlayOpaqueXattr + " on " + what);
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
        if (::unlinkat(parent.get(), name.c_str(), 0) != 0) throw_errno(ErrorKind::Image, "remove whiteout " + key);
        if (::mkdirat(parent.get(), name.c_str(), 0755) != 0) throw_errno(ErrorKind::Image, "mkdir " + key);
        if (::fchownat(parent.get(), name.c_str(), o.uid, o.gid, AT_SYMLINK_NOFOLLOW) != 0) {
          throw_errno(ErrorKind::Image, "chown " + key);
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
        if (as_root_ && ::fchown(root_.get(), m.uid, m.gid) != 0) throw_errno(ErrorKind::Image, "chown root directory");
        if (::fchmod(root_.get(), m.mode) != 0) throw_errno(ErrorKind::Image, "chmod root directory");
        if (::futimens(root_.get(), m.times) != 0) throw_errno(ErrorKind::Image, "set times of root directory");
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
      // Through an fd opened O_NOFOLLOW: inside a box, another process may swap the
      // directory for a symlink at any moment, and chmod by name would follow it.
      UniqueFd dir(::openat(parent.get(), name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (dir) {
        if (::fchmod(dir.get(), m.mode) != 0) throw_errno(ErrorKind::Image, "chmod directory " + what);
        if (::futimens(dir.get(), m.times) != 0) throw_errno(ErrorKind::Image, "set times of directory " + what);
        continue;
      }
      if (errno == ENOENT || errno == ENOTDIR || errno == ELOOP) continue;  // replaced meanwhile
      if (errno != EACCES) throw_errno(ErrorKind::Image, "open directory " + what);
      // Unreadable to an unprivileged unpacker (an earlier layer's mode): by name.
      // fchmodat follows symlinks, but the fstatat above saw a directory, and an
      // unprivileged image build has no concurrent writer.
      if (::fchmodat(parent.get(), name, m.mode, 0) != 0) throw_errno(ErrorKind::Image, "chmod directory " + what);
      if (::utimensat(parent.get(), name, m.times, AT_SYMLINK_NOFOLLOW) != 0) {
        throw_errno(ErrorKind::Image, "set times of directory " + what);
      }
    }
  }

  struct DirMeta {
    Components path;
    EntryMeta meta;
  };

  std::string label_;
  std::optional<OverlayOptions> overlay_;
  std::optional<CopyMode> copy_;
  uint64_t max_bytes_ = UINT64_MAX;
  bool single_done_ = false;                     // copy mode: the one entry of a single-file archive is written
  std::string current_;                          // copy mode: where the entry being applied goes
  std::optional<detail::Owner> implicit_owner_;  // of directories made for paths (overlay mode)
  bool as_root_ = ::geteuid() == 0;
  UniqueFd root_;
  archive* reader_;  // the caller's
  UnpackStats stats_;
  std::unordered_set<std::string> written_;    // this layer's paths and their ancestors
  uint64_t written_bytes_ = 0;                 // the names in written_
  std::unordered_set<std::string> skipped_;    // device nodes left out
  std::unordered_set<std::string> whiteouts_;  // whiteout devices made (overlay mode)
  std::vector<DirMeta> dirs_;
  std::unordered_map<std::string, size_t> dir_index_;
};

}  // namespace

UnpackStats apply_archive(UniqueFd root, archive* reader, const std::string& label, const ApplyMode& mode,
                          archive_entry* first) {
  return LayerApplier(std::move(root), reader, label, mode).run(first);
}

std::string entry_path(archive_entry* e) { return path_of(e); }
const char* entry_hardlink(archive_entry* e) { return hardlink_of(e); }
std::string shorten(const std::string& s) { return shorten_name(s); }

// libarchive fails without a reason at times: its gzip reader returns ARCHIVE_FATAL
// and sets none when the stream's 8-byte trailer (CRC-32 and size) is cut short,
// and none is set when the read callback fails. Input that ends or breaks inside
// a compressed stream is what leaves it speechless.
std::string archive_error_text(archive* a) {
  const char* msg = la::archive_error_string(a);
  if (msg && *msg) return msg;
  int err = la::archive_errno(a);
  // libarchive's own codes borrow EILSEQ (file format) and EINVAL (misuse), whose
  // strerror text would mislead, or are -1 (misc).
  if (err > 0 && err != EILSEQ && err != EINVAL) return std::strerror(err);
  return "truncated or corrupt archive data (libarchive gives no reason: a compressed stream may end early)";
}

}  // namespace boxlite::image::detail

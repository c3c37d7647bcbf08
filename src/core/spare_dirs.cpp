#include "core/spare_dirs.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>  // renameat2
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <string_view>
#include <vector>

#include "common/fd.hpp"
#include "common/io.hpp"

namespace boxlite::core {
namespace {

constexpr const char* kLayerDirs[] = {"upper", "work"};

bool is_layer_dir(std::string_view name) { return name == kLayerDirs[0] || name == kLayerDirs[1]; }

std::string slot(const std::string& spares, int n) { return spares + "/" + std::to_string(n); }

// (Or none at all: a box with a disk has no layer directories.)
bool is_empty_or_absent_directory(const std::string& path) {
  std::unique_ptr<DIR, int (*)(DIR*)> dir(::opendir(path.c_str()), ::closedir);
  if (!dir) return errno == ENOENT;
  while (dirent* e = ::readdir(dir.get())) {
    std::string_view name = e->d_name;
    if (name != "." && name != "..") return false;
  }
  return true;
}

// The extended attributes the box (user.*, ACLs on its `/`) or overlayfs
// (trusted.overlay.*) may have left go; false if any other kind is there (a security
// label, say), which a directory made afresh would not carry over.
bool strip_box_xattrs(const std::string& path) {
  ssize_t len = ::llistxattr(path.c_str(), nullptr, 0);
  if (len < 0) return errno == ENOTSUP;
  if (len == 0) return true;
  std::string names(static_cast<size_t>(len), '\0');
  len = ::llistxattr(path.c_str(), names.data(), names.size());
  if (len < 0) return false;
  names.resize(static_cast<size_t>(len));
  for (size_t at = 0; at < names.size();) {
    std::string name = names.c_str() + at;
    at += name.size() + 1;
    std::string_view n = name;
    bool ours = n.starts_with("user.") || n.starts_with("trusted.overlay.") || n == "system.posix_acl_access" ||
                n == "system.posix_acl_default";
    if (!ours || (::lremovexattr(path.c_str(), name.c_str()) != 0 && errno != ENODATA)) return false;
  }
  return true;
}

// What a directory's owner may set on it that emptying it does not undo: its inode
// flags (chattr) and its extended flags, extent size hints and project (xfs_io
// chattr), zero where the file system has none.
struct InodeAttrs {
  int flags = 0;
  fsxattr fsx{};
  bool operator==(const InodeAttrs& o) const {
    return (flags & ~FS_INDEX_FL) == (o.flags & ~FS_INDEX_FL) && fsx.fsx_xflags == o.fsx.fsx_xflags &&
           fsx.fsx_extsize == o.fsx.fsx_extsize && fsx.fsx_cowextsize == o.fsx.fsx_cowextsize &&
           fsx.fsx_projid == o.fsx.fsx_projid;
  }
};

bool unsupported(int err) { return err == ENOTTY || err == ENOTSUP || err == EINVAL; }

bool inode_attrs(const std::string& path, InodeAttrs& attrs) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) return false;
  attrs = InodeAttrs{};
  if (::ioctl(fd.get(), FS_IOC_GETFLAGS, &attrs.flags) != 0 && !unsupported(errno)) return false;
  if (::ioctl(fd.get(), FS_IOC_FSGETXATTR, &attrs.fsx) != 0 && !unsupported(errno)) return false;
  return true;
}

// An emptied layer directory that a new box could not tell from a fresh one by what
// it can read of its `/`: no more than a block (a directory once large keeps its
// size), none of the box's extended attributes, and the inode flags and attributes
// the box directory gave it when it was made (the box may set some on its `/`; it
// never reaches the box directory). Its inode number and birth time stay those of
// the old box's `/` (docs/jail.md).
bool fit_for_reuse(const std::string& layer, const InodeAttrs& box_dir_attrs) {
  struct stat st;
  if (::lstat(layer.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_blocks * 512 > st.st_blksize) return false;
  if (!strip_box_xattrs(layer)) return false;
  InodeAttrs attrs;
  return inode_attrs(layer, attrs) && attrs == box_dir_attrs;
}

}  // namespace

bool remove_all_but_layers(const std::string& box_dir) noexcept {
  try {
    std::unique_ptr<DIR, int (*)(DIR*)> dir(::opendir(box_dir.c_str()), ::closedir);
    if (!dir) return false;
    std::vector<std::string> names;
    while (dirent* e = ::readdir(dir.get())) {
      std::string_view name = e->d_name;
      if (name != "." && name != ".." && !is_layer_dir(name)) names.emplace_back(name);
    }
    for (const auto& name : names) {
      std::string path = box_dir;
      path.append("/").append(name);
      if (::unlink(path.c_str()) == 0 || errno == ENOENT) continue;
      remove_tree(path);  // a directory; throws (false below) what it cannot remove
    }
    return true;
  } catch (const std::exception&) {  // remove_tree's Error, std::bad_alloc
    return false;
  }
}

bool empty_layer_for_spare(const std::string& layer) noexcept {
  try {
    if (!empty_directory(layer)) return false;
    InodeAttrs box_dir_attrs;
    return inode_attrs(layer.substr(0, layer.rfind('/')), box_dir_attrs) && fit_for_reuse(layer, box_dir_attrs);
  } catch (const std::exception&) {  // std::bad_alloc
    return false;
  }
}

bool take_spare_box_dir(const std::string& spares, const std::string& box_dir) noexcept {
  try {
    for (int n = 0; n < kSpareBoxDirs; ++n) {
      // As new as a made one before it is a box's: the half-made sweep of another
      // process removes a box directory with no record whose time is a minute old.
      // (Touching a spare someone else then takes is harmless.)
      std::string spare = slot(spares, n);
      if (::utimensat(AT_FDCWD, spare.c_str(), nullptr, AT_SYMLINK_NOFOLLOW) != 0) continue;  // none kept there
      if (::renameat2(AT_FDCWD, spare.c_str(), AT_FDCWD, box_dir.c_str(), RENAME_NOREPLACE) != 0)
        continue;  // taken meanwhile
      struct stat st;
      if (::lstat(box_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {  // not one we kept: the home's owner's
        (void)::unlink(box_dir.c_str());
        continue;
      }
      (void)::utimensat(AT_FDCWD, (box_dir + "/upper").c_str(), nullptr, AT_SYMLINK_NOFOLLOW);  // the box's `/`
      return true;
    }
  } catch (const std::exception&) {  // std::bad_alloc: make one instead
  }
  return false;
}

bool keep_as_spare(const std::string& spares, const std::string& box_dir) noexcept {
  try {
    // Anything made since remove_all_but_layers (the shim's last words in its log).
    if (!remove_all_but_layers(box_dir)) return false;
    for (const char* layer : kLayerDirs) {
      if (!is_empty_or_absent_directory(box_dir + "/" + layer)) return false;  // never a spare with anything in it
    }
    for (int attempt = 0; attempt < 2; ++attempt) {
      int err = 0;
      for (int n = 0; n < kSpareBoxDirs && err != ENOENT; ++n) {
        if (::renameat2(AT_FDCWD, box_dir.c_str(), AT_FDCWD, slot(spares, n).c_str(), RENAME_NOREPLACE) == 0) {
          return true;
        }
        err = errno;
        if (err != EEXIST && err != ENOENT) return false;
      }
      if (err != ENOENT) return false;                                          // every place taken
      if (::mkdir(spares.c_str(), 0700) != 0 && errno != EEXIST) return false;  // the first spare of this home
    }
    return false;
  } catch (const std::exception&) {  // std::bad_alloc: removed instead
    return false;
  }
}

}  // namespace boxlite::core

// Where things live: the home directory layout and the runtime's own binaries.
#pragma once

#include <string>

namespace boxlite::core {

// $BOXLITE_HOME, else ~/.boxlite.
std::string default_home();

struct HomeLayout {
  std::string root;
  std::string boxes() const { return root + "/boxes"; }
  std::string box_dir(const std::string& id) const { return boxes() + "/" + id; }
  std::string images() const { return root + "/images"; }
  std::string kernel_cache() const { return root + "/kernel"; }
  std::string tmp() const { return root + "/tmp"; }
  std::string locks() const { return root + "/locks"; }
  // Every jail box's shim mounts its box's root here, in its own mount namespace.
  std::string jail_root_mountpoint() const { return tmp() + "/jail-root"; }
  // ...and its disk, the file system its writable layer lives on (engine/jail/disk.hpp).
  std::string jail_disk_mountpoint() const { return tmp() + "/jail-disk"; }
  // The empty ext4 images, one per size, that a jail box's disk is a copy of.
  std::string jail_disk_templates() const { return images() + "/jail-disks"; }
  // Emptied jail box directories kept for the next jail box (core/spare_dirs.hpp).
  std::string spare_box_dirs() const { return tmp() + "/spare-box-dirs"; }
  void create() const;
  // The layout of the home that holds the box directory `box_dir` (<home>/boxes/<id>).
  static HomeLayout of_box_dir(const std::string& box_dir);
};

// Directory of boxlite-shim, boxlite-guest and kernel/: $BOXLITE_LIBEXEC_DIR,
// else the directory of the running executable when it holds boxlite-shim,
// else <dir>/boxlite or <dir> of the shared library holding this code (an installed
// or in-tree libboxlite.so), else the build tree this library was compiled in.
std::string libexec_dir();

}  // namespace boxlite::core

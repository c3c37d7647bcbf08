// The jail box's disk: its writable layer (the overlay's upper and work directories)
// lives on an ext4 file system of its own, a sparse image <box_dir>/disk.ext4 of
// disk_size_gb on a loop device, so that a box that fills it gets ENOSPC and the
// host's file system and other boxes are unaffected (docs/jail.md, "The box's disk").
// The image is a copy of a template the home makes once per size with mke2fs
// (~120 KiB on the host whatever the size), made by the shim at the box's first
// start. A box made before disks existed, or on a host without loop devices, keeps
// its writable layer in <box_dir>/upper, unbounded.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "common/fd.hpp"

namespace boxlite::engine::jail {

inline constexpr const char kDiskImageName[] = "disk.ext4";
inline std::string disk_image_path(const std::string& box_dir) { return box_dir + "/" + kDiskImageName; }
// The directories the overlay uses on the disk's file system.
inline constexpr const char kDiskUpperDir[] = "upper";
inline constexpr const char kDiskWorkDir[] = "work";

// "" if this host can give a jail box a disk of its own, else why not (no loop
// device control, say, as in a container without /dev/loop-control). Checked once
// per process.
std::string disks_unavailable();

// Where the home's template of a disk of `bytes` is kept in `dir`.
std::string disk_template_path(const std::string& dir, uint64_t bytes);
// That template (made if missing): an empty ext4 of `bytes` (a multiple of 1 MiB)
// made once by mke2fs, with no journal and its inode tables left as holes (which
// read as zeros), so that a box's disk is a copy of a few extents. Storage when it
// cannot be made (mke2fs missing: e2fsprogs).
std::string ensure_disk_template(const std::string& dir, uint64_t bytes);

// A new disk image of the size of `template_path`, empty (one hole), as an unnamed
// file (O_TMPFILE) in the directory `dir`: it goes away by itself unless
// link_disk_image names it. Mount it with fill_from the template.
UniqueFd new_disk_image(const std::string& template_path, const std::string& dir);
// Gives the unnamed image `image` the name `path` (which must not exist).
void link_disk_image(int image, const std::string& path);
// A sparse copy of the image `from` at `to` (made under a temporary name, then
// renamed over `to`): a reflink where the file system can, else its data extents.
void copy_disk_image(const std::string& from, const std::string& to);

struct DiskMountOptions {
  bool read_only = false;
  // A box removed when it stops: its disk never needs to survive a host crash, so
  // nothing it writes is flushed to the host's disk (ext4 nobarrier).
  bool ephemeral = false;
  // A new image (new_disk_image): the template whose data is written onto it
  // through its loop device, before the mount.
  std::string fill_from;
};

// The image's file system (`image`, open for reading, and writing unless
// read_only; `name` for messages), on a loop device of its own, as a detached
// mount (fsmount): its fd, the only thing that holds it. The loop device is
// released with the mount's last reference (LO_FLAGS_AUTOCLEAR), so nothing is left
// on the host however the holder dies. A file system a host crash left unchecked
// is checked first (e2fsck -p). Engine errors name the step.
UniqueFd mount_disk(int image, const std::string& name, const DiskMountOptions& opts);
// The same for the image file at `path`.
UniqueFd mount_disk(const std::string& path, const DiskMountOptions& opts);

// A disk made before its box is known. A shim started early (core/shim_launch.hpp:
// `boxlite run`) makes one from the template its starter names while that parses,
// opens its store and reads the image, so that the loop device's attach (a flush
// of the host's disk) and the mount (a superblock written, a kernel thread) are
// off the box's start path. One per process: the box's first start takes it if it
// wants a new disk from that template, mounted alike; otherwise it is let go (an
// unmount). A warm disk that cannot be made is no error: the start makes its own.
void prepare_warm_disk(const std::string& template_path, bool ephemeral) noexcept;
// The warm disk's image (unnamed, in the template's directory) and mount, if it
// is one of `template_path` mounted as `ephemeral` asks; false otherwise.
bool take_warm_disk(const std::string& template_path, bool ephemeral, UniqueFd& image, UniqueFd& mount) noexcept;
void drop_warm_disk() noexcept;

// Flushes what a running box wrote to its disk into the image (syncfs), through
// its shim's mount namespace, where the disk is mounted at `mountpoint`. With the
// box's processes frozen, a copy of the image made next is a consistent one.
void sync_running_disk(pid_t shim_pid, const std::string& mountpoint);

}  // namespace boxlite::engine::jail

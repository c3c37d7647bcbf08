// Spare jail box directories: a removed jail box's directory, emptied, is kept for
// the next jail box instead of being removed and made again (docs/jail.md, "Spare box
// directories"). Each directory a box makes and frees costs a block allocated and
// freed, and on file systems that discard freed blocks synchronously (ext4 -o
// discard, common on cloud disks) a wait for the device on the box's way out.
#pragma once

#include <string>

namespace boxlite::core {

// How many spares a home keeps, at <home>/tmp/spare-box-dirs/0..7.
inline constexpr int kSpareBoxDirs = 8;

// Moves a spare to `box_dir` (which must not exist), its times set to now as a new
// directory's: true if there was one to take. A spare holds nothing but an empty
// upper/ and work/ (a box without a disk's), or nothing at all (a box with a disk:
// engine/jail/disk.hpp, whose writable layer went with its image).
bool take_spare_box_dir(const std::string& spares, const std::string& box_dir) noexcept;

// Keeping a jail box's directory as a spare, on its way out once its processes are
// gone (its shim may still be exiting: its overlay still holds upper/ and work/, but
// nothing writes there any more), in three steps that may overlap:
//
// Empties upper/ or work/ (`layer`) and checks that nothing the box could set on its
// `/` is left that a new box could tell from a fresh directory: an extended attribute
// (the box's user.* and ACLs, overlayfs's trusted.overlay.* are removed), an inode
// flag its box directory did not give it, the size of a directory that was once
// large. False if it is not fit.
bool empty_layer_for_spare(const std::string& layer) noexcept;
// Removes everything in `box_dir` but upper/ and work/. False if something is left.
bool remove_all_but_layers(const std::string& box_dir) noexcept;
// Once its shim is reaped (so that no overlay holds upper/ and work/, both emptied
// and found fit above): removes what has appeared in `box_dir` meanwhile and moves
// it to a free place among the spares. False if it cannot: the caller removes what is
// left, as for any box.
bool keep_as_spare(const std::string& spares, const std::string& box_dir) noexcept;

}  // namespace boxlite::core

// Applying OCI layer tarballs onto a directory, safely against hostile images.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <limits>
#include <string>

namespace boxlite::image {

struct Layer;  // oci_layout.hpp

// What each entry of a layer costs the image's budget beside its file bytes: at
// least an inode and a block. A layer of a few KB of gzip can declare millions of
// empty directories; counted so, it hits the budget instead of the host's inodes.
inline constexpr uint64_t kEntryCost = 4096;

struct UnpackStats {
  uint64_t files = 0, dirs = 0, symlinks = 0, hardlinks = 0, whiteouts = 0, skipped_devices = 0, bytes = 0;
  uint64_t entries = 0;  // every entry applied, the root's included
  // What the layer took of the budget: its files' apparent bytes and kEntryCost per entry.
  uint64_t budget_used() const { return bytes + entries * kEntryCost; }
};

// Applies one layer tar (plain, gzip, zstd or xz: libarchive autodetects) onto
// root_dir, honouring OCI whiteouts: ".wh.NAME" removes NAME from lower layers;
// ".wh..wh..opq" makes its directory opaque (lower-layer entries removed, entries of
// this same layer kept whatever their order in the tar).
//
// The image is assumed malicious. root_dir acts as "/" for every path in the tar:
//  - nothing is ever written through a symlink: parents are resolved with
//    openat2(RESOLVE_IN_ROOT) (symlinks and ".." confined to root_dir) and the last
//    component is created with *at calls and O_NOFOLLOW / AT_SYMLINK_NOFOLLOW;
//  - absolute paths are made relative; ".." never climbs above root_dir;
//  - hardlink targets are resolved inside root_dir too;
//  - device nodes, fifos and sockets are skipped (counted in skipped_devices);
//  - modes are masked to 07777 (setuid/setgid/sticky kept); ownership is applied
//    (never following symlinks) only when running as root; mtimes are preserved;
//  - an entry replacing an existing entry of another type removes it first; a
//    directory over a directory merges (and takes the new metadata);
//  - entries over 64 GiB or paths/link targets over 4096 bytes are refused.
// Errors: boxlite::Error(ErrorKind::Image) naming the layer and the entry. On error
// root_dir is left half-applied; callers unpack into a scratch directory.
// max_bytes caps the apparent size of the regular files this layer writes (a
// sparse-file bomb declares terabytes in a few bytes of tar) plus kEntryCost for
// every entry: over it, an Image error. Callers unpacking several layers pass what
// is left of the image's budget (UnpackStats::budget_used). The names the applier
// keeps of what the layer wrote are capped too (kMaxTrackedPathBytes in apply.cpp):
// a layer of deep paths cannot make it hold gigabytes.
UnpackStats apply_layer(const std::string& root_dir, const std::string& layer_path, uint64_t max_bytes = UINT64_MAX);

// apply_layer for a layout's layer blob, opened confined to its layout
// (open_layer_blob) and hashed as it is read: a blob whose bytes are not its digest
// is an Image error ("digest mismatch") once read, root_dir then half-applied.
// `blob_st`, when given, gets the fstat of the blob file that was read and verified.
UnpackStats apply_layer_blob(const std::string& root_dir, const Layer& layer, uint64_t max_bytes = UINT64_MAX,
                             struct stat* blob_st = nullptr);

// The per-image budget: $BOXLITE_MAX_IMAGE_BYTES when set (bytes), else 32 GiB.
// Throws Config for a value that is not a positive number.
uint64_t max_image_bytes();

// Ownership shift for layers used by a user-namespaced box: box id N is host id
// offset+N, for N in 0..65535.
struct OverlayOptions {
  uint32_t uid_offset = 0;
  uint32_t gid_offset = 0;
  uint64_t max_bytes = UINT64_MAX;  // as apply_layer's
};

// Extracts one layer tar into the EMPTY directory layer_dir in overlayfs "lowerdir"
// format, so that a stack of such directories mounted as an overlay shows the image:
//  - ".wh.NAME" becomes a whiteout (char device 0:0) named NAME; when this layer also
//    wrote NAME itself, that entry stays (a directory is made opaque, so that it
//    still hides the lower layers' NAME), whatever the order in the tar;
//  - ".wh..wh..opq" sets the xattr trusted.overlay.opaque="y" on its directory;
//  - everything else as apply_layer does, with the same hostile-input rules
//    (confined parents, no writing through symlinks, device nodes from the tar
//    skipped, modes masked, size and path limits, tar xattrs never applied), except
//    that ownership is always applied, shifted: uid+uid_offset, gid+gid_offset
//    (fchownat AT_SYMLINK_NOFOLLOW). Ids above 65535 are refused (Image error naming
//    the entry). Directories the tar does not list but its paths need are created
//    0755, owned by uid_offset:gid_offset.
// Hardlink targets must be in this layer (and not a whiteout). Paths are resolved in
// this layer only: a symlink that a LOWER layer defines is not followed (the tar path
// makes a real directory here, which hides the lower symlink in the overlay).
// Stats count whiteouts and opaque markers in `whiteouts`.
// Errors: Unsupported when not root (ownership shifting needs it); InvalidArgument
// for a non-empty layer_dir or offsets that overflow uid_t; Image for bad input.
// On error layer_dir is left half-written.
UnpackStats extract_layer_for_overlay(const std::string& layer_dir, const std::string& layer_path,
                                      const OverlayOptions& opts);
// The same for a layout's layer blob, verified as it is read (apply_layer_blob).
UnpackStats extract_layer_blob_for_overlay(const std::string& layer_dir, const Layer& layer, const OverlayOptions& opts,
                                           struct stat* blob_st = nullptr);

}  // namespace boxlite::image

// Applying OCI layer tarballs onto a directory, safely against hostile images.
#pragma once

#include <cstdint>
#include <string>

namespace boxlite::image {

struct UnpackStats {
  uint64_t files = 0, dirs = 0, symlinks = 0, hardlinks = 0, whiteouts = 0, skipped_devices = 0, bytes = 0;
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
// Errors: boxlite::Error(ErrorCode::Image) naming the layer and the entry. On error
// root_dir is left half-applied; callers unpack into a scratch directory.
UnpackStats apply_layer(const std::string& root_dir, const std::string& layer_path);

}  // namespace boxlite::image

// Root disks: one ext4 base image per image digest (shared, read-only, built once)
// and one qcow2 overlay per box on top of it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "image/oci_layout.hpp"

namespace boxlite::rootfs {

// Returns the path of the cached ext4 base image for `img`:
// <home>/images/disk-images/<manifest hex>.ext4, building it when missing:
// verifies and unpacks all layers (image::apply_layer, base first) into a scratch
// dir under <home>/tmp, then runs
//   mkfs.ext4 -q -F -L rootfs -E root_owner=0:0 -d DIR FILE SIZE
// with SIZE = content * 1.25 + 256 MiB rounded up to 1 MiB (a sparse file).
// Built under a temp name in disk-images and rename()d into place, with
// <home>/locks/image-<hex>.lock flocked so concurrent builders (threads or
// processes) of one digest build it once. Scratch files are removed on every path.
// Also writes <hex>.json next to it (manifest digest, tag, image config, size).
// Errors: Image (bad layer, see apply_layer) or Storage (mkfs, disk).
std::string ensure_base_ext4(const std::string& home, const image::LocalImage& img);

// The most layers the jail engine mounts as one overlay: an image with more is
// refused before anything is unpacked. (Their names must also fit in a page of
// mount options, ~50 layers with a short home: the mount says so when they do not.)
inline constexpr size_t kMaxOverlayLayers = 64;

// Jail engine: the per-layer directories of `img` for an overlayfs mount, lowest
// first (give them to lowerdir= in reverse), in overlayfs lowerdir format with every
// owner shifted by uid_offset (box id N = host id uid_offset+N, uids and gids alike;
// see image::extract_layer_for_overlay). Each is cached at
//   <home>/images/layers/<layer digest hex>-<uid_offset>/
// and only ever written before it appears there: built in a ".tmp-*" directory next
// to it (extracted while its blob is hashed, verified, synced) and rename()d into
// place, under a flock of <home>/locks/layer-<hex>-<uid_offset>.lock so that
// concurrent builders (threads or processes) extract a layer once; temp directories
// are removed on every error path. A layer shared by images is extracted once per
// offset. The root of each directory is uid_offset:uid_offset, mode 0755.
// The result is what to mount, which may be fewer directories than layers:
//  - a layer listed twice appears once, at its upper position (overlayfs refuses a
//    repeated lowerdir; the merged view is the same);
//  - layers below one whose root is opaque (".wh..wh..opq" at the top of its tar)
//    are left out, as overlayfs ignores an opaque lower root.
// Errors: Unsupported when not root and a layer must be built; InvalidArgument for
// an offset leaving no room for 65536 ids; Image (digest, blob, bad layer) or Storage.
std::vector<std::string> ensure_overlay_layers(const std::string& home, const image::LocalImage& img,
                                               uint32_t uid_offset);

// qemu-img create -f qcow2 -F raw -b BASE OVERLAY [size_bytes if > base size].
// The backing path is stored absolute. The overlay appears atomically (temp name +
// rename). Errors: ErrorKind::Storage carrying qemu-img's stderr.
void create_overlay(const std::string& base, const std::string& overlay, uint64_t size_bytes = 0);

}  // namespace boxlite::rootfs

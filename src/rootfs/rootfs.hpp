// Root disks: one ext4 base image per image digest (shared, read-only, built once)
// and one qcow2 overlay per box on top of it.
#pragma once

#include <cstdint>
#include <string>

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

// qemu-img create -f qcow2 -F raw -b BASE OVERLAY [size_bytes if > base size].
// The backing path is stored absolute. The overlay appears atomically (temp name +
// rename). Errors: ErrorCode::Storage carrying qemu-img's stderr.
void create_overlay(const std::string& base, const std::string& overlay, uint64_t size_bytes = 0);

}  // namespace boxlite::rootfs

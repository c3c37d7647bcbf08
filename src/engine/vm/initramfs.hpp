// The guest initramfs (host side).
#pragma once

#include <string>

namespace boxlite::engine::vm {

// Builds (or reuses) <cache_dir>/initramfs-<hash>.cpio holding the agent as /init
// and, for a modular kernel, the modules it must load (modules_dir: the kernel's
// /lib/modules/<ver>, "" for the built-in minimal kernel). Returns its path.
std::string ensure_initramfs(const std::string& cache_dir, const std::string& guest_binary,
                             const std::string& modules_dir);

}  // namespace boxlite::engine::vm

// The vm engine: QEMU microvm command line, the guest initramfs, and the KVM probe.
#pragma once

#include <string>
#include <vector>

#include "engine/spec.hpp"

namespace boxlite::engine::vm {

inline constexpr const char* kAgentPortName = "boxlite.agent";
inline constexpr const char* kRootDiskSerial = "rootfs";

std::vector<std::string> qemu_argv(const ShimSpec& spec);

// Builds (or reuses) <cache_dir>/initramfs-<hash>.cpio holding the agent as /init
// and, for a modular kernel, the modules it must load (modules_dir: the kernel's
// /lib/modules/<ver>, "" for the built-in minimal kernel). Returns its path.
std::string ensure_initramfs(const std::string& cache_dir, const std::string& guest_binary,
                             const std::string& modules_dir);

struct AccelProbe {
  bool usable = false;
  double probe_ms = 0;
  std::string reason;  // why not usable
};
// Runs a tiny guest loop under KVM in this process. Call it from a child process
// with a deadline: a broken KVM can make it hang (see boxlite-shim --probe-kvm).
AccelProbe probe_kvm_inprocess();

}  // namespace boxlite::engine::vm

// The vm engine: QEMU microvm command line, the guest initramfs, and the KVM probe.
#pragma once

#include <string>
#include <vector>

#include "engine/spec.hpp"

namespace boxlite::engine::vm {

inline constexpr const char* kAgentPortName = "boxlite.agent";
inline constexpr const char* kRootDiskSerial = "rootfs";

std::vector<std::string> qemu_argv(const ShimSpec& spec);

struct AccelProbe {
  bool usable = false;
  double probe_ms = 0;
  std::string reason;  // why not usable
};
// Runs a tiny guest loop under KVM in this process. Call it from a child process
// with a deadline: a broken KVM can make it hang (see boxlite-shim --probe-kvm).
AccelProbe probe_kvm_inprocess();

}  // namespace boxlite::engine::vm

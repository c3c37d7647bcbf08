// Phase 1 (generic init) and phase 2 (this box's root) of the guest's boot.
#pragma once

#include <string>

#include "boxlite.pb.h"

namespace boxlite::guest {

// PID 1 in a VM: mount /dev, /proc, /sys of the initramfs and load any kernel
// modules listed in /modules/load.list (modular kernels only).
void init_vm_phase1();

// Finds the virtio-serial port QEMU named `name` and returns its /dev path.
std::string find_virtio_port(const std::string& name);

// Phase 2 in a VM: mount the root disk found by serial, the pseudo filesystems in
// it, then make it the root (MS_MOVE + chroot: initramfs cannot be pivot_root'ed).
void setup_vm_root(const proto::BoxConfig& cfg);

// Phase 2 in a VM, after setup_vm_root: with a max_processes limit (BoxConfig.limits
// nproc), the agent moves itself into a pids cgroup of the guest kernel capped to it
// (cgroup2 at /sys/fs/cgroup, group "boxlite"), so that it and every process of the
// box count, as in a jail box's pids cgroup. Nothing without one.
void limit_vm_box_processes(const proto::BoxConfig& cfg);

// Settings common to both engines: hostname, clock, entropy.
void apply_box_identity(const proto::BoxConfig& cfg);

// Kills every process and powers the VM off (reboot=t with QEMU -no-reboot).
[[noreturn]] void vm_power_off();

}  // namespace boxlite::guest

// ShimSpec: everything a shim needs to run one box, written by the runtime to
// <box_dir>/shim.json. The shim knows nothing else about the runtime.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "boxlite/engine_kind.hpp"
#include "engine/box_dir.hpp"
#include "net/config.hpp"

namespace boxlite::engine {

// A host directory shared into the box. vm: a virtio-9p share (mount tag
// "vol<N>") that QEMU itself makes read-only; jail: a bind mount made by the shim.
struct VolumeMount {
  std::string host_path;  // canonical (symlinks resolved at create)
  std::string guest_path;
  bool read_only = false;
};

struct ShimSpec {
  std::string box_id;
  std::string box_dir;
  EngineKind engine = kDefaultEngine;
  std::string accel = "tcg";  // resolved: "kvm" | "tcg"
  std::string qemu = "qemu-system-x86_64";
  std::string kernel;  // vmlinux / bzImage
  std::string initramfs;
  std::string kernel_cmdline_extra;
  // Describe devices through ACPI (kernels without virtio_mmio cmdline devices,
  // such as Debian's) instead of virtio_mmio.device= on the command line.
  bool acpi = false;
  // QEMU -cpu under TCG. Debian's kernel stalls early with `max` (its clock never
  // advances) and boots with `qemu64`; the minimal kernel is measured with `max`.
  std::string tcg_cpu = "max";
  std::string disk;       // qcow2 overlay (vm)
  std::string disk_base;  // the ext4 base image under it (vm)
  // jail engine
  std::vector<std::string> lower_dirs;  // overlay lower layers, lowest first
  // Where the shim mounts the box's root, in its own mount namespace: one empty
  // directory of the home that every shim shares (each sees only its own mount
  // there), so that a box makes no directory of its own for it. Empty (a box made
  // before it existed): <box_dir>/rootfs.
  std::string root_mountpoint;
  unsigned uid_offset = 1u << 20;  // box uid 0 = this host uid
  int pids_limit = 4096;
  // ---- engine-common: SecurityOptions (docs/python.md) ----
  // seccomp: the jail's filter, or QEMU's own sandbox (vm). The rlimits of the box's
  // processes, 0 = the engine's default: a jail's init sets them (docs/jail.md), a
  // VM's agent on every process it starts, with rlimit_nproc also its pids cgroup
  // (docs/decisions.md, "SecurityOptions limits on the vm engine").
  bool seccomp = true;
  uint64_t rlimit_nofile = 0, rlimit_fsize = 0, rlimit_nproc = 0, rlimit_as = 0, rlimit_cpu = 0;
  // ---- end of the engine-common SecurityOptions ----
  std::string guest_binary;  // boxlite-guest: a VM's /init (a jail's zygote is the one beside the shim)
  // Removed when it stops (auto_remove): its files need not survive a host crash,
  // so the jail's overlay skips syncing the host's file system at unmount.
  bool ephemeral = false;
  int cpus = 1;
  int memory_mib = 1024;
  double boot_timeout_secs = 60;
  // Phase-2 configuration.
  std::string hostname;
  std::vector<std::string> env;
  std::string working_dir;
  std::string user;
  // The main command (entrypoint+cmd), PID 1 of the box's processes; the box stops
  // when it exits. Empty: none (the box runs until stopped).
  std::vector<std::string> main_argv;
  bool main_tty = false;
  bool main_stdin = true;  // an open (never written) stdin keeps `sh`-like commands alive
  unsigned main_rows = 24, main_cols = 80;
  // The box's network (net/config.hpp); disabled: no interface but loopback.
  net::NetConfig net;
  std::vector<VolumeMount> volumes;

  // ---- jail engine only: the box's disk (engine/jail/disk.hpp, docs/jail.md "The
  // box's disk"). Kept together, to move with the per-engine part of the spec.
  // The size of <box_dir>/disk.ext4, the ext4 image its writable layer (the
  // overlay's upper and work directories) lives on: disk_size_gb. 0: none (a box
  // made before disks existed, or on a host without loop devices), the writable
  // layer is the directory <box_dir>/upper on the host's file system, unbounded.
  uint64_t jail_disk_bytes = 0;
  // Where the shim mounts that disk in its own mount namespace: one directory of
  // the home that every shim shares, as root_mountpoint is.
  std::string jail_disk_mountpoint;
  // The home's empty ext4 of that size, which the image is a copy of: made by the
  // shim at the box's first start (a box never started has none yet).
  std::string jail_disk_template;
};

// The 9p mount tag of the spec's volume number `index`.
inline std::string volume_tag(size_t index) { return "vol" + std::to_string(index); }

std::string spec_to_json(const ShimSpec& s);
ShimSpec spec_from_json(const std::string& text);

}  // namespace boxlite::engine

// ShimSpec: everything a shim needs to run one box, written by the runtime to
// <box_dir>/shim.json. The shim knows nothing else about the runtime.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
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

// The VM engine's own part of a spec (engine/vm): what QEMU boots.
struct VmSpec {
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
  std::string disk;          // qcow2 overlay
  std::string disk_base;     // the ext4 base image under it
  std::string guest_binary;  // boxlite-guest: the VM's /init (a jail's zygote is the one beside the shim)
};

// The jail engine's own part of a spec (engine/jail): the overlay root it mounts.
struct JailSpec {
  std::vector<std::string> lower_dirs;  // overlay lower layers, lowest first
  // Where the shim mounts the box's root, in its own mount namespace: one empty
  // directory of the home that every shim shares (each sees only its own mount
  // there), so that a box makes no directory of its own for it. Empty (a box made
  // before it existed): <box_dir>/rootfs.
  std::string root_mountpoint;
  unsigned uid_offset = 1u << 20;  // box uid 0 = this host uid
  int pids_limit = 4096;
  // The box's disk (engine/jail/disk.hpp, docs/jail.md "The box's disk").
  // The size of <box_dir>/disk.ext4, the ext4 image its writable layer (the
  // overlay's upper and work directories) lives on: disk_size_gb. 0: none (a box
  // made before disks existed, or on a host without loop devices), the writable
  // layer is the directory <box_dir>/upper on the host's file system, unbounded.
  uint64_t disk_bytes = 0;
  // Where the shim mounts that disk in its own mount namespace: one directory of
  // the home that every shim shares, as root_mountpoint is.
  std::string disk_mountpoint;
  // The home's empty ext4 of that size, which the image is a copy of: made by the
  // shim at the box's first start (a box never started has none yet).
  std::string disk_template;
};

// Common fields, and the engine's own part: a jail spec cannot carry a kernel, nor
// a VM spec overlay layers. The engine is the part's kind, so the two never disagree.
struct ShimSpec {
  std::string box_id;
  std::string box_dir;
  std::variant<VmSpec, JailSpec> engine_spec;  // VmSpec first: kDefaultEngine

  EngineKind engine() const { return engine_spec.index() == 0 ? EngineKind::Vm : EngineKind::Jail; }
  // A fresh part of `kind`'s engine (its defaults), replacing the one there was.
  void set_engine(EngineKind kind);
  // The engine's own part; asking the wrong engine's is a bug (ErrorKind::Internal).
  VmSpec& vm();
  const VmSpec& vm() const;
  JailSpec& jail();
  const JailSpec& jail() const;
  // nullptr when the box runs on the other engine.
  const JailSpec* if_jail() const { return std::get_if<JailSpec>(&engine_spec); }
  JailSpec* if_jail() { return std::get_if<JailSpec>(&engine_spec); }
  const VmSpec* if_vm() const { return std::get_if<VmSpec>(&engine_spec); }
  VmSpec* if_vm() { return std::get_if<VmSpec>(&engine_spec); }

  // ---- engine-common: SecurityOptions (docs/python.md) ----
  // seccomp: the jail's filter, or QEMU's own sandbox (vm). The rlimits of the box's
  // processes, 0 = the engine's default: a jail's init sets them (docs/jail.md), a
  // VM's agent on every process it starts, with rlimit_nproc also its pids cgroup
  // (docs/decisions.md, "SecurityOptions limits on the vm engine").
  bool seccomp = true;
  uint64_t rlimit_nofile = 0, rlimit_fsize = 0, rlimit_nproc = 0, rlimit_as = 0, rlimit_cpu = 0;
  // ---- end of the engine-common SecurityOptions ----
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
};

// The 9p mount tag of the spec's volume number `index`.
inline std::string volume_tag(size_t index) { return "vol" + std::to_string(index); }

// shim.json. The keys are those of every earlier build, the engine's own at the top
// level as they always were (the jail's disk under "jail"); a spec carries only its
// engine's. An earlier build wrote both engines' keys for every box: the other
// engine's are accepted when they hold what that build wrote for a box that did
// not use them (empty, or its defaults), and refused (ErrorKind::Config) when they
// say something, such as a jail spec naming a kernel.
std::string spec_to_json(const ShimSpec& s);
ShimSpec spec_from_json(const std::string& text);

}  // namespace boxlite::engine

// Engine: what runs a box, behind one interface, so that the shim and the runtime
// never ask which engine a box has. A VM (engine/vm) is a QEMU microVM with its
// own kernel; a jail (engine/jail) is namespaces, an overlay root and seccomp on
// the host's kernel. make_engine is the one place that picks between them.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "boxlite.pb.h"
#include "common/fd.hpp"
#include "common/process.hpp"
#include "engine/jail/jail.hpp"
#include "engine/spec.hpp"

namespace boxlite::engine {

// What a running box's engine uses.
struct Usage {
  uint64_t cpu_ns = 0;        // CPU time so far (the VM's, or the jail's cgroup's)
  uint64_t memory_bytes = 0;  // in use now (the VM's resident set, or the cgroup's)
};

// How the box's network reaches boxlite-net (src/net).
enum class NetLink {
  StreamSocket,  // QEMU's -netdev stream connects to net.sock, which boxlite-net listens on first
  Tap,           // a TAP device the shim makes in the box's network namespace
};

// The engine's process, started: the box's channel to its agent, and the engine's
// own output for the shim to cap into the box's logs.
struct Launched {
  Child process;                      // QEMU, or the box's init
  UniqueFd channel;                   // to the guest agent
  UniqueFd console, output;           // read ends of its console and its stderr (invalid: none)
  std::vector<std::string> warnings;  // limits that could not be enforced
  bool etc_files_bound = false;       // /etc/hosts and /etc/resolv.conf bound by the start (jail)
};

class Engine {
 public:
  virtual ~Engine() = default;
  virtual EngineKind kind() const = 0;
  // What the box's process is called in messages ("the VM (QEMU)").
  virtual std::string_view process_name() const = 0;
  // A boot failure shows the guest kernel's console tail.
  virtual bool has_console() const = 0;
  virtual NetLink net_link() const = 0;
  // The agent is this build's (a jail's comes from beside the shim): the host's hello
  // and configuration go at once, without waiting for the agent's hello first.
  virtual bool pipelined_handshake() const = 0;

  // Starts the engine's process. `box_netns_ready(fd)`, when the engine has a
  // network namespace of its own to give (a jail), runs once it exists, so that the
  // shim's network setup overlaps the rest of the start. Throws Error naming what
  // failed; by `deadline_ms` (now_ms()) the agent's channel is up or it throws.
  virtual Launched start(double deadline_ms, const std::function<void(int netns)>& box_netns_ready) = 0;
  // The engine's part of phase 2 (BoxConfig fields only it knows how to fill).
  virtual void configure(proto::BoxConfig& cfg) const = 0;
  virtual Usage usage(pid_t process) const = 0;
  // What is left of a box on the host once its processes are gone (a jail's
  // cgroups). Safe to call twice, and for a box that never ran.
  virtual void release() const noexcept = 0;
  // Snapshot hooks: every process of the running box holds still until thaw(), so
  // that its writable layer can be copied whole. Unsupported where the engine
  // freezes the disk instead (a VM's, through QEMU's monitor: docs/storage.md).
  virtual void freeze() const = 0;
  virtual void thaw() const = 0;
  // Before a box of this engine is created or started: any preparation that
  // overlaps the work before the start (a jail's cgroup attach). Best effort.
  virtual void prepare_host() const {}
  // In the shim, before the box starts: a jail's overlay and every mount under it
  // live and die with the shim's own mount namespace.
  virtual void prepare_shim_process() const {}
  // Where the box's root is mounted in the shim's namespace ("" when it is a disk
  // the engine opens): unmounted before an abandoned box's directory is removed.
  virtual std::string mounted_root() const { return {}; }
  // Whether the box's start takes a disk the shim made before it knew its box (a
  // jail's warm disk, engine/jail/disk.hpp); one an engine does not take is let go.
  virtual bool takes_warm_disk() const { return false; }
  // Whether a clone grows over its source's disk (a VM's qcow2 chain), so that the
  // source cannot go while its clones need it. A jail's clone copies what it wrote.
  virtual bool clones_depend_on_source() const { return false; }
  // Whether box directories are reused: a box whose shim said it is down is removed
  // while its shim exits, nothing writing its layers any more, and its directory
  // kept as a spare that a new box takes (core/spare_dirs.hpp). A jail's are.
  virtual bool reuses_box_dirs() const { return false; }
};

// The engine of `spec`'s box. `zygote`: what a jail box's init is cloned from (the
// shim starts it before it knows its box); without one, a jail engine can do all but
// start.
std::unique_ptr<Engine> make_engine(const ShimSpec& spec, jail::Zygote zygote = {});
// The engine of a box known by its kind and id alone (a store row), for what needs
// no more of its spec: prepare_host(), release() and the properties.
std::unique_ptr<Engine> make_engine(EngineKind kind, const std::string& box_id);

}  // namespace boxlite::engine

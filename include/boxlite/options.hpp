// Options of the runtime, a box, and an exec: the C++ face of the documented BoxOptions.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "boxlite/engine_kind.hpp"
#include "boxlite/images.hpp"

namespace boxlite {

using EnvList = std::vector<std::pair<std::string, std::string>>;

namespace core {
class ShimLaunch;
}

// A box's shim started before the runtime that starts the box exists, so that its
// start (~1 ms: an exec) overlaps the caller's own work (the CLI's `run` starts one
// before it parses its flags). Given to a runtime (RuntimeOptions::early_shim), it
// is taken by that runtime's next box start of the same kind (detached or not); one
// never taken ends with the runtime. The shim is always exec'd, never a fork of the
// caller (docs/decisions.md, "The CLI starts the shim early").
// What the caller expects of the box the early shim will get, so that the shim can
// prepare for it while the caller works (a jail box's disk, from the home's
// template of that size). A wrong guess costs only what the shim prepared in vain.
struct EarlyShimGuess {
  std::string home_dir;              // "" = $BOXLITE_HOME or ~/.boxlite
  std::optional<EngineKind> engine;  // nullopt = $BOXLITE_ENGINE (the home's config is not read)
  uint64_t disk_size_gb = 0;         // 0 = kDefaultDiskSizeGb
  bool auto_remove = false;
};

class EarlyShim {
 public:
  EarlyShim() = default;
  // Spawns the shim now. Throws Error when it cannot (the start then spawns one).
  static EarlyShim start(bool detached, const EarlyShimGuess &guess = {});
  explicit operator bool() const { return launch_ != nullptr; }
  // The shim itself, for the runtime that takes it (nullptr once taken).
  std::shared_ptr<core::ShimLaunch> take() { return std::move(launch_); }

 private:
  std::shared_ptr<core::ShimLaunch> launch_;
};

struct RuntimeOptions {
  std::string home_dir;  // "" = $BOXLITE_HOME or ~/.boxlite
  // Tried in order for unqualified image names (those with search=true); empty =
  // the home's config.json "image_registries", else docker.io only.
  std::vector<ImageRegistry> image_registries;
  // Holds the home's runtime lock for the runtime's lifetime (what
  // Runtime::default_runtime() does): a second exclusive runtime on the same home,
  // in any process, fails with "Another BoxliteRuntime is already using directory".
  bool exclusive = false;
  // Opens the state store on a thread while the constructor returns: its first use
  // waits for it and throws what opening it threw (Database, ...), which a runtime
  // made without this throws from its constructor. The CLI's `run` sets it: the
  // store's open (~0.4 ms) overlaps reading the image and writing the box's spec.
  bool open_store_in_background = false;
  // A shim started ahead of the runtime for its next box start (EarlyShim).
  EarlyShim early_shim;
};

// The documented NetworkSpec: mode "enabled" (default) or "disabled" (no interface
// but loopback); with "enabled", a non-empty allow_net limits egress to those
// hosts (exact, or "*.example.com" for its subdomains). docs/networking.md.
struct NetworkSpec {
  std::string mode = "enabled";
  std::vector<std::string> allow_net;
};

// The documented PortSpec: host_port 0 means the same number as guest_port;
// protocol "tcp" or "udp"; host_ip "" binds every host address (0.0.0.0).
struct PortSpec {
  int host_port = 0;
  int guest_port = 0;
  std::string protocol = "tcp";
  std::string host_ip;
};

// The documented Secret: the box sees only BOXLITE_SECRET_<NAME> holding the
// placeholder; the host's TLS proxy puts the real value in place of the placeholder
// in headers, query and body (never the path) of HTTPS requests to `hosts`
// (exact or "*.x"; empty = any host). placeholder "" = "<BOXLITE_SECRET:name>".
struct Secret {
  std::string name;
  std::string value;
  std::vector<std::string> hosts;
  std::string placeholder;
};

// One host directory shared into the box (docs/storage.md). The documented forms
// (host, guest[, read_only]), the dict form and the CLI's -v host:guest[:ro|:rw]
// all become this; validate_volume() checks it.
struct VolumeSpec {
  std::string host_path;   // an existing absolute directory on the host
  std::string guest_path;  // absolute, normalized, not / and not a system directory
  bool read_only = false;
};

// The documented SecurityOptions, as far as the core enforces them (docs/python.md):
// each limit is an rlimit of the box's processes on both engines (a jail's init sets
// it for the whole box; a VM's agent on every process it starts), and max_processes
// also caps the box's pids cgroup (the host's for a jail, the guest kernel's for a
// VM). seccomp=false skips the jail's seccomp filter, or QEMU's own sandbox on vm.
// nullopt = no limit beyond the defaults (docs/jail.md, docs/decisions.md).
struct SecurityOptions {
  bool seccomp = true;
  std::optional<uint64_t> max_open_files;  // RLIMIT_NOFILE
  std::optional<uint64_t> max_file_size;   // RLIMIT_FSIZE, bytes
  std::optional<uint64_t> max_processes;   // RLIMIT_NPROC and pids.max
  std::optional<uint64_t> max_memory;      // RLIMIT_AS, bytes
  std::optional<uint64_t> max_cpu_time;    // RLIMIT_CPU, seconds
};

struct BoxOptions {
  std::string image;  // a registry reference ("alpine", "host:5000/repo:tag", "...@sha256:..."), an OCI layout path or
                      // oci:DIR[:TAG]
  std::string rootfs_path;        // a local OCI image layout directory
  std::optional<int> cpus;        // default 1
  std::optional<int> memory_mib;  // default 1024
  EnvList env;
  std::string working_dir;
  std::string user;
  std::vector<std::string> entrypoint;  // overrides the image's when non-empty
  std::vector<std::string> cmd;         // overrides the image's when non-empty
  std::optional<EngineKind> engine;     // nullopt = $BOXLITE_ENGINE, the home config's, or vm
  std::string accel;                    // "auto" | "kvm" | "tcg"; "" = $BOXLITE_ACCEL or auto
  std::string kernel;                   // "" = the minimal kernel; "debian"; or a path (file, or a dpkg -x tree)
  bool auto_remove = true;
  // Keep running after the creating process exits (needs auto_remove=false).
  bool detach = false;
  double boot_timeout_secs = 60;
  // The main command's stdio (the CLI's `run -i/-t`). By default its stdin is an
  // open pipe nobody writes, so a shell-like main command (`sh`, `python3`) waits
  // instead of exiting at once and the box stays up for exec.
  bool main_tty = false;
  bool main_stdin = true;
  unsigned main_rows = 24, main_cols = 80;
  NetworkSpec network;
  std::vector<PortSpec> ports;
  std::vector<Secret> secrets;
  std::vector<VolumeSpec> volumes;
  // The root disk's size in GiB (docs/storage.md), default kDefaultDiskSizeGb: a
  // sparse qcow2 overlay of that size, the guest's ext4 grown to fill it at boot
  // (vm); a sparse ext4 image of that size holding the overlay's writable layer
  // (jail). A box that fills it gets ENOSPC.
  std::optional<uint64_t> disk_size_gb;
  SecurityOptions security;
};
inline constexpr uint64_t kDefaultDiskSizeGb = 10;
inline constexpr uint64_t kMaxDiskSizeGb = 16384;  // 16 TiB, far beyond any ext4 resize limit we rely on

struct ExecOptions {
  std::vector<std::string> argv;  // command then args; never a shell string
  EnvList env;
  std::string cwd;
  std::string user;
  bool tty = false;
  unsigned rows = 24, cols = 80;
  double timeout_secs = 0;  // 0 = none
  bool stdin_open = false;
  // Keeps running after this client lets go of it (CLI `exec -d`); its output is
  // then discarded.
  bool detach = false;
};

enum class StreamKind { Stdout, Stderr };

struct OutputChunk {
  StreamKind stream;
  std::string data;
};

struct ExecResult {
  int exit_code = 0;  // negative: killed by that signal
  bool timed_out = false;
};

// The buffered result (SimpleBox-style). Each stream keeps at most
// kMaxBufferedOutput bytes; the rest is dropped and *_truncated is set.
struct BufferedResult {
  int exit_code = 0;
  bool timed_out = false;
  double timeout_secs = 0;  // the limit that was hit, when timed_out
  std::string stdout_text, stderr_text;
  bool stdout_truncated = false, stderr_truncated = false;

  // The agent-facing rendering every interface shares: stdout, then a "STDERR:"
  // block when there is stderr (a timeout adds "Command timed out after Ns"), then
  // "Exit code: N". Longer than max_chars (Unicode code points), the middle is cut
  // and marked "... (N chars truncated) ...". The exit code line is always kept.
  std::string as_text(size_t max_chars = 10000) const;
};
inline constexpr size_t kMaxBufferedOutput = 16u << 20;

// box.metrics(): this run of the box (counters restart with each start) and how
// long its creation and last start took, by stage. Field names as documented.
struct BoxMetrics {
  double cpu_percent = 0;     // since the previous metrics() call (or the start); 100 = one CPU
  uint64_t memory_bytes = 0;  // the VM's resident memory, or the jail's cgroup usage
  uint64_t commands_executed_total = 0, exec_errors_total = 0;
  uint64_t network_bytes_sent = 0, network_bytes_received = 0;
  uint64_t bytes_sent_total = 0, bytes_received_total = 0;  // = network_bytes_*
  uint64_t network_tcp_connections = 0, network_tcp_errors = 0;
  // create() plus the last start(); guest_boot: from the engine's start to the agent's hello.
  int64_t total_create_duration_ms = 0, guest_boot_duration_ms = 0;
  // nullopt where the stage did not happen (never started; no disk image for a jail).
  std::optional<int64_t> stage_filesystem_setup_ms, stage_image_prepare_ms, stage_guest_rootfs_ms, stage_box_spawn_ms,
      stage_container_init_ms;
};

// runtime.metrics(): counters of this Runtime object since it was made, and the
// boxes of its home running now.
struct RuntimeMetrics {
  uint64_t num_running_boxes = 0;
  uint64_t boxes_created_total = 0, boxes_failed_total = 0;
  uint64_t total_commands_executed = 0, total_exec_errors = 0;
};

// Validates BoxOptions; throws Error(InvalidArgument) naming the bad field.
void validate_box_options(const BoxOptions &o);

// The CLI's -v host:guest[:ro|:rw], checked as BoxOptions::volumes are.
VolumeSpec parse_volume_flag(const std::string &flag);

}  // namespace boxlite

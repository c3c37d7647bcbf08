// A box directory (<home>/boxes/<id>/): every file in it is named here, and the
// records that cross between the runtime and the shim (the shim's spec, its ready
// report, its exit record) each have one writer and one reader here. Names are short
// because unix socket paths are limited to 107 bytes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "boxlite/error.hpp"

namespace boxlite::engine {

struct ShimSpec;

// Files of the runtime and the shim.
inline std::string spec_path(const std::string& box_dir) { return box_dir + "/shim.json"; }
inline std::string exit_record_path(const std::string& box_dir) { return box_dir + "/exit.json"; }
inline std::string shim_socket_path(const std::string& box_dir) { return box_dir + "/shim.sock"; }
inline std::string shim_log_path(const std::string& box_dir) { return box_dir + "/shim.log"; }
// The engine's: the agent channel (vm: QEMU's chardev), QEMU's monitor (how the
// runtime freezes a running box's disk, docs/storage.md), its console and output,
// and boxlite-net's socket and output.
inline std::string agent_socket_path(const std::string& box_dir) { return box_dir + "/agent.sock"; }
inline std::string qmp_socket_path(const std::string& box_dir) { return box_dir + "/qmp.sock"; }
inline std::string console_log_path(const std::string& box_dir) { return box_dir + "/console.log"; }
inline std::string qemu_log_path(const std::string& box_dir) { return box_dir + "/qemu.log"; }
inline std::string net_socket_path(const std::string& box_dir) { return box_dir + "/net.sock"; }
inline std::string net_log_path(const std::string& box_dir) { return box_dir + "/net.log"; }
// The box's writable layer: a qcow2 overlay (vm), or an overlay's upper and work
// directories (jail); and its snapshots and frozen disks.
inline std::string disk_path(const std::string& box_dir) { return box_dir + "/disk.qcow2"; }
inline std::string upper_dir(const std::string& box_dir) { return box_dir + "/upper"; }
inline std::string work_dir(const std::string& box_dir) { return box_dir + "/work"; }
inline std::string snapshots_dir(const std::string& box_dir) { return box_dir + "/snapshots"; }
// Where a jail box's root is mounted when the home has no shared mount point for it.
inline std::string own_root_mountpoint(const std::string& box_dir) { return box_dir + "/rootfs"; }
// The frozen disk a vm clone's disk is backed by, kept in its source box: while one
// is there the source may not go (Runtime's destroy, the shim's abandoned-box removal).
inline constexpr const char kCloneBackingPrefix[] = "clone-";
inline std::string clone_backing_path(const std::string& source_box_dir, const std::string& clone_id) {
  return snapshots_dir(source_box_dir) + "/" + kCloneBackingPrefix + clone_id + ".qcow2";
}

// shim.json: written by the runtime (atomically; durable unless the box is
// ephemeral), read by the shim and by every later runtime process.
void write_spec(const ShimSpec& spec);
ShimSpec read_spec(const std::string& box_dir);

// exit.json: why the box stopped, written by its shim as it goes. A shim killed
// outright cannot write it; the runtime then says so instead.
struct ExitRecord {
  std::string reason;
  int64_t stopped_at_ms = 0;
  std::optional<int> main_exit_code;  // when the box stopped because its main command exited
};
void write_exit_record(const std::string& box_dir, const ExitRecord& r, bool durable);
// nullopt when there is none, or it cannot be read (a torn write is no record).
std::optional<ExitRecord> read_exit_record(const std::string& box_dir);
void remove_exit_record(const std::string& box_dir);

// The shim's one report to its starter, on the ready pipe, when its box is up (or
// could not be brought up): the boot's stages, the limits it could not enforce, or
// the error.
struct BootStages {
  int64_t box_spawn_ms = 0, guest_boot_ms = 0, container_init_ms = 0;
};
struct ReadyReport {
  std::optional<Error> error;  // set: the box did not come up
  BootStages stages;
  std::vector<std::string> warnings;
};
std::string encode_ready_report(const ReadyReport& r);
// A report that is neither (empty: the shim died first) is nullopt.
std::optional<ReadyReport> decode_ready_report(std::string_view text, std::string_view sender);

}  // namespace boxlite::engine

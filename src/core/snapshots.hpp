// Snapshots of a box's disk (box.snapshot in the documentation) and the disk
// operations clone, export and import build on. docs/storage.md has the design:
// a vm box's disk is a chain of qcow2 files; a snapshot freezes the top of the
// chain (renamed into <box>/snapshots/) and puts a new empty top over it, so
// create, restore and clone cost the same whatever the disk holds.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace boxlite {

class Box;

// The documented SnapshotInfo. created_at in Unix seconds; size_bytes: the host
// bytes the snapshot's own layer takes; container_disk_bytes: the box disk's
// (virtual) size when it was taken.
struct SnapshotInfo {
  std::string id, box_id, name;
  int64_t created_at = 0;
  uint64_t container_disk_bytes = 0, size_bytes = 0;
};

// box.snapshot: every call takes the box's lock; all but list/get need the box
// not running (vm engine only: the jail engine gives Unsupported).
class SnapshotHandle {
 public:
  explicit SnapshotHandle(Box& box) : box_(box) {}
  // AlreadyExists for a taken name; InvalidState while the box runs.
  SnapshotInfo create(const std::string& name);
  std::vector<SnapshotInfo> list();
  std::optional<SnapshotInfo> get(const std::string& name);
  // InvalidState "Cannot remove snapshot: current disk depends on this snapshot..."
  // when it is in the chain under the box's disk (or another snapshot's).
  void remove(const std::string& name);
  // InvalidState "Cannot restore snapshot while box is running. Stop the box first."
  void restore(const std::string& name);

 private:
  Box& box_;
};

namespace disk {

// qemu-img create -f qcow2 -F <backing_format> -b <backing> <path> (atomically).
void create_overlay_on(const std::string& backing, const std::string& backing_format, const std::string& path);
// The files under `path` (itself first), by qemu-img info --backing-chain.
std::vector<std::string> backing_chain(const std::string& path);
// Freezes a box's disk.qcow2 as `frozen` (a rename) and puts a new empty
// disk.qcow2 over it; on failure the disk is put back.
void freeze_top(const std::string& box_dir, const std::string& frozen);
// One self-contained qcow2 of the whole chain (no backing file).
void flatten(const std::string& path, const std::string& out);
// cp -a of a directory tree to `to` (which must not exist), via a temporary name.
void copy_tree(const std::string& from, const std::string& to);
// Makes `path` independent of everything below it except `new_base` (raw, or ""
// for none), copying what differs (qemu-img rebase, safe mode).
void rebase(const std::string& path, const std::string& new_base, const std::string& base_format);

}  // namespace disk
}  // namespace boxlite

// Snapshots of a box's disk (box.snapshot in the documentation). A vm box's disk is
// a chain of qcow2 files: a snapshot freezes the top of the chain and puts a new
// empty top over it, so create, restore and clone cost the same whatever the disk
// holds; a jail box's snapshot is a copy of its writable layer (docs/storage.md).
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

// box.snapshot: every call takes the box's lock. create works on a running box
// too (it is quiesced and resumed); restore needs it stopped. Whether the box runs
// is asked of its shim, not of the handle, so an invalidated handle (stop()) or a
// stale one sees the truth.
class SnapshotHandle {
 public:
  explicit SnapshotHandle(Box &box) : box_(box) {}
  // AlreadyExists for a taken name.
  SnapshotInfo create(const std::string &name);
  std::vector<SnapshotInfo> list();
  std::optional<SnapshotInfo> get(const std::string &name);
  // InvalidState "Cannot remove snapshot: current disk depends on this snapshot..."
  // when it is in the chain under the box's disk (or another snapshot's).
  void remove(const std::string &name);
  // InvalidState "Cannot restore snapshot while box is running. Stop the box first."
  void restore(const std::string &name);

 private:
  Box &box_;
};

}  // namespace boxlite

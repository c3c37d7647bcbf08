// The disk operations snapshots (boxlite/snapshots.hpp), clone, export and import
// build on. docs/storage.md has the design: a vm box's disk is a chain of qcow2
// files; a snapshot freezes the top of the chain (renamed into <box>/snapshots/)
// and puts a new empty top over it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "boxlite/snapshots.hpp"

namespace boxlite {

class LocalBox;
namespace store {
class Store;
}

namespace disk {

// qemu-img create -f qcow2 -F <backing_format> -b <backing> <path> (atomically).
// With a virtual size, the backing file is not opened (-u): it may be in use by a
// running QEMU.
void create_overlay_on(const std::string& backing, const std::string& backing_format, const std::string& path,
                       uint64_t virtual_size = 0);
// The disk image's virtual size (0 when unreadable).
uint64_t virtual_size(const std::string& path);
// The files under `path` (itself first), by qemu-img info --backing-chain.
std::vector<std::string> backing_chain(const std::string& path);
// Freezes a box's disk.qcow2 as `frozen` (a rename) and puts a new empty
// disk.qcow2 over it; on failure the disk is put back. The box must be stopped.
void freeze_top(const std::string& box_dir, const std::string& frozen);
// The same for a box whose QEMU runs: pauses the VM (QMP stop), links the top
// as `frozen`, makes the new top under a one-time name and has QEMU switch to it
// (blockdev-snapshot-sync, mode existing), renames it to disk.qcow2, and resumes
// the VM (cont) whatever happened. (No rename before the switch: QEMU reopens the
// old top read-only by its name.)
void freeze_running_top(const std::string& box_dir, const std::string& frozen);
// One self-contained qcow2 of the whole chain (no backing file).
void flatten(const std::string& path, const std::string& out);
// cp -a of a directory tree to `to` (which must not exist), via a temporary name.
void copy_tree(const std::string& from, const std::string& to);
// Makes `path` independent of everything below it except `new_base` (raw, or ""
// for none), copying what differs (qemu-img rebase, safe mode).
void rebase(const std::string& path, const std::string& new_base, const std::string& base_format);

}  // namespace disk

// Refuses (InvalidState "Cannot remove box: boxes [ids] have clone dependencies on
// it...") removing a box that vm clones still grow over. Every remove path checks
// it: Runtime::remove (which with force first makes the clones independent), and
// Box::destroy (auto_remove, `run --rm`, the C API's remove of a handle it holds).
void check_no_clone_dependents(store::Store& store, const std::string& box_id);

// Whether the box runs now, whichever handle asks: its shim answers.
bool box_is_running(const LocalBox& b);
// Freezes the vm box's current disk as `frozen` with a new empty top over it,
// running or not. A running box's agent syncs its file systems first (the "sync"
// builtin; an older agent only costs a warning: the freeze is then crash-
// consistent). Caller holds the box's lock.
void freeze_box_disk(LocalBox& b, const std::string& frozen);
// Copies the jail box's upper layer to `to` (which must not exist; an empty one for
// a box never started). A running box's processes are frozen (cgroup freezer) for
// the copy. Caller holds the box's lock.
void copy_jail_upper(LocalBox& b, const std::string& to);
// Whether the jail box's writable layer lives on a disk of its own (its image,
// <box>/disk.ext4: engine/jail/disk.hpp) rather than in <box>/upper.
bool has_jail_disk(const LocalBox& b);
// Copies the jail box's disk image to `to` (which must not exist), sparse. A
// running box's processes are frozen, and what they wrote synced into the image,
// for the copy. Caller holds the box's lock.
void copy_jail_disk(LocalBox& b, const std::string& to);

}  // namespace boxlite

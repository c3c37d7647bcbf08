// Reconciliation: the store's rows and the box directories agree again, at runtime
// open (half-made boxes swept, lost rows recorded again) and whenever a row is read
// (a running box whose shim is gone is stopped; a removed auto_remove box forgotten).
#include <dirent.h>
#include <sys/stat.h>

#include <cerrno>
#include <ctime>
#include <memory>
#include <set>
#include <string>

#include "common/error.hpp"
#include "common/file_lock.hpp"
#include "common/io.hpp"
#include "core/record_copy.hpp"
#include "core/runtime.hpp"
#include "core/shim_launch.hpp"
#include "engine/box_dir.hpp"
#include "engine/engine.hpp"

namespace boxlite {

// A create killed between making the box directory and recording the box leaves a
// directory nobody knows. A create spends milliseconds in that window, so one
// older than a minute with no record is debris.
// On the store's opener: store_, not store().
void LocalRuntime::sweep_half_made_boxes() {
  std::set<std::string> known;
  for (const auto& r : store_->list()) {
    known.insert(r.id);
    // The removal of an auto_remove box's row is not synced (store.hpp): after a host
    // crash the row can outlive the directory removed before it. Such a row is debris too.
    forget_if_removed(r);
  }
  std::unique_ptr<DIR, int (*)(DIR*)> dir(::opendir(layout_.boxes().c_str()), ::closedir);
  if (!dir) return;
  time_t now = ::time(nullptr);
  while (auto* e = ::readdir(dir.get())) {
    std::string id = e->d_name;
    if (id == "." || id == ".." || known.count(id)) continue;
    std::string path = layout_.box_dir(id);
    struct stat st;
    // (A spare taken for a new box has its time set before it moves here.)
    if (::lstat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || now - st.st_mtime < 60) continue;
    // A box in use is not half-made, whatever the store says (one replaced or
    // truncated under a running box): never removed under its shim or a taker.
    if (pid_t shim = unix_listener_pid(engine::shim_socket_path(path)); shim > 0) {
      warn("box directory " + path + " has a running shim (pid " + std::to_string(shim) +
           ") but no row in the store: left alone; stop the shim (kill " + std::to_string(shim) +
           ") and it is removed later");
      continue;
    }
    try {
      FileLock lock = FileLock::try_acquire_directory(path);
      if (!lock.held()) continue;
      if (core::has_record_copy(path)) {
        record_again(path);
        continue;
      }
      remove_tree(path);
    } catch (const Error& err) {
      warn("could not remove the half-made box directory " + path + ": " + err.what());
    }
  }
}

// A kept box whose row was lost (the database replaced, truncated or deleted under
// it) is no half-made box: its directory holds the copy of its row made once the row
// was committed (core/record_copy.hpp). It is recorded again, stopped; under another
// box's name now, it loses its name. A copy that cannot be read leaves the directory
// alone: it is never swept.
void LocalRuntime::record_again(const std::string& box_dir) {
  store::BoxRecord r;
  try {
    r = core::read_record_copy(box_dir);
    r.stopped_at_ms = wall_clock_ms();
  } catch (const Error& err) {
    warn("box directory " + box_dir + " has no row in the store and its " + core::kRecordCopyFile +
         " cannot be read (" + err.what() + "): left alone; remove the directory if the box is not wanted");
    return;
  }
  std::string label = r.name.empty() ? r.id : r.id + " (" + r.name + ")";
  try {
    // Another process may have recorded it since we listed the rows (we hold its lock now).
    if (auto known = store_->find_exact(r.id); known && known->id == r.id) return;
    if (!r.name.empty() && store_->find_exact(r.name)) {
      warn("box " + label + ": its name now belongs to another box, so it is recorded again without one");
      r.name.clear();
      core::keep_record_copy(box_dir, r);
    }
    store_->insert(r);
  } catch (const Error& err) {
    warn("box " + label + " is missing from the store and could not be recorded again (" + err.what() +
         "): its directory " + box_dir + " is left alone");
    return;
  }
  warn("box " + label + " was missing from the store (was the database replaced?): recorded again, stopped, from " +
       box_dir + "/" + core::kRecordCopyFile);
}

// A box's directory is made before its row and, but for a jail box's destroy (which
// forgets the row while its shim exits, and records it again if the directory then
// cannot be removed), removed before it, so an auto_remove box without one is on its
// way out: removed by its shim (boxlite-shim: its owner exited without removing it),
// by a destroy that has yet to forget it, or before a host crash lost the unsynced
// removal of its row. A directory whose row went first is swept as half-made once a
// minute old (sweep_half_made_boxes).
bool LocalRuntime::forget_if_removed(const store::BoxRecord& r) {
  struct stat st;
  if (!r.auto_remove || ::lstat(layout_.box_dir(r.id).c_str(), &st) == 0 || errno != ENOENT) return false;
  try {
    store_->remove(r.id, /*durable=*/false);  // store_: the opener's sweep calls this too
  } catch (const Error& err) {
    warn("could not forget the removed box " + r.id + ": " + err.what());
  }
  return true;
}

bool LocalRuntime::reconcile(store::BoxRecord& r) {
  if (forget_if_removed(r)) return false;
  std::string dir = layout_.box_dir(r.id);
  if (r.state != BoxState::Running) return true;
  if (core::is_shim_of(r.shim_pid, dir)) return true;
  r.state = BoxState::Stopped;
  r.stop_reason = "the box's shim was killed";
  r.stopped_at_ms = wall_clock_ms();
  if (auto exit = engine::read_exit_record(dir); exit && exit->stopped_at_ms >= r.started_at_ms) {
    if (!exit->reason.empty()) r.stop_reason = exit->reason;
    r.stopped_at_ms = exit->stopped_at_ms;
    r.main_exit_code = exit->main_exit_code;
  }
  r.shim_pid = 0;
  // A killed shim could not retire the jail's cgroups; its processes died with it.
  engine::make_engine(r.engine, r.id)->release();
  try {
    store()->update(r);
  } catch (const Error&) {
    // Removed meanwhile.
  }
  return true;
}

}  // namespace boxlite

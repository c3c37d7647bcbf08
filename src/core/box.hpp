// A box: one isolated machine. Created lazily; start() (or the first exec) boots it.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "boxlite/lifecycle.hpp"
#include "common/fd.hpp"
#include "common/file_lock.hpp"
#include "common/process.hpp"
#include "core/copy.hpp"
#include "core/counters.hpp"
#include "core/execution.hpp"
#include "core/options.hpp"
#include "core/shim_launch.hpp"
#include "core/snapshots.hpp"
#include "engine/spec.hpp"
#include "store/store.hpp"

namespace boxlite {

class Box {
 public:
  Box(engine::ShimSpec spec, std::string name, std::vector<std::string> default_argv, bool auto_remove);
  // A box with a record in the home's state store: its transitions are persisted.
  Box(engine::ShimSpec spec, store::BoxRecord record, std::vector<std::string> default_argv,
      std::shared_ptr<store::Store> store);
  // A box that another process created and is running (Runtime::attach): connects
  // to its shim. Dropping it leaves the box running; it is never booted from here
  // (exec on it once it stopped is a Stopped error); stop() and destroy() still act
  // on it. Throws Stopped when its shim is gone. With its record: a recorded shim
  // that is alive but does not answer (stopped with SIGSTOP, or hung) leaves the
  // box running, which stop() and destroy() end by killing the shim and what needs
  // the connection refuses, saying why.
  static std::shared_ptr<Box> attach(engine::ShimSpec spec);
  static std::shared_ptr<Box> attach(engine::ShimSpec spec, store::BoxRecord record,
                                     std::shared_ptr<store::Store> store);
  ~Box();
  Box(const Box&) = delete;
  Box& operator=(const Box&) = delete;

  const std::string& id() const { return spec_.box_id; }
  const std::string& name() const { return name_; }
  const std::string& dir() const { return spec_.box_dir; }
  BoxState state();
  // The image's entrypoint+cmd (or the box's overrides): what `run` runs by default.
  const std::vector<std::string>& default_command() const { return default_argv_; }
  const engine::ShimSpec& spec() const { return spec_; }

  // Starts the box (a no-op when running). On a handle invalidated by stop(), start()
  // makes it valid again: code that does box->stop(); box->start() keeps working.
  // A shim handed the box by Runtime::create_to_start is taken here (with the box's
  // lock, held since).
  void start();
  // From its next start on, the box outlives the process that starts it (a detached
  // box, recorded so by that start). For the CLI's start and restart: a box made by
  // a foreground `run` is not detached, and would stop as the CLI exits. No effect
  // on a running box.
  void make_detached();
  // box.snapshot: create/list/get/remove/restore (core/snapshots.hpp).
  SnapshotHandle snapshot() { return SnapshotHandle(*this); }
  // Refused (InvalidState) when the box stopped because its main command exited:
  // start() it again first.
  Execution exec(const ExecOptions& opts);
  // Follows the main command: its output so far (from its log), then live output,
  // then its exit code. with_stdin: this caller writes its stdin (one at a time).
  // Starts a created box; on a box whose main command has exited, returns that
  // finished run. NotFound when the box has no main command.
  Execution attach(bool with_stdin = false);
  // The main command's output kept in its log (capped; see protocol/main_log.hpp):
  // the last `tail_lines` lines, or all with 0.
  std::vector<OutputChunk> main_log(size_t tail_lines = 0);
  // As main_log, handing each chunk to sink; with follow on a running box, then
  // goes on with live output until the main command exits or the box stops.
  void logs(size_t tail_lines, bool follow, const std::function<void(const OutputChunk&)>& sink);
  // The main command's exit code once it has exited (the box then stops).
  std::optional<int> main_exit_code();
  // Runs to completion and buffers output (at most kMaxBufferedOutput per stream).
  BufferedResult run(const ExecOptions& opts);
  // Copies host_path into the box at box_path, or box_path out to host_path, with
  // docker cp semantics (core/copy.hpp); starts the box if needed. Errors name the
  // box and the path: NotFound (a missing source, or a destination's missing
  // parent), AlreadyExists (overwrite off, or a file onto a directory),
  // InvalidArgument (a directory onto a file, an empty path), Storage (I/O),
  // Stopped. A failed copy may leave part of a directory copied.
  void copy_in(const std::string& host_path, const std::string& box_path, const CopyOptions& opts = {});
  void copy_out(const std::string& box_path, const std::string& host_path, const CopyOptions& opts = {});
  // Stops the box: the guest shuts down and the VM exits. The disk stays.
  // It also invalidates this handle: exec, run, attach, copy_in and copy_out on it
  // then fail with Stopped ("Handle invalidated after stop(). Use runtime.get() to
  // get a new handle.") until start() is called on it. Snapshot, clone and export
  // keep working (the documented restore is stop(); snapshot.restore(); get()).
  // A box that stops by itself (its main command exits) invalidates nothing.
  void stop();
  // Whether stop() invalidated this handle (and no start() since).
  bool invalidated();
  // As stop(), but gives the guest at most timeout_ms to shut down before the
  // engine is killed (-1: wait as long as it takes).
  void stop(int timeout_ms);
  // Stops and deletes everything of the box (its directory, disk, sockets).
  void destroy();
  // This run's counters and usage, and the creation and start timings by stage.
  // Never starts the box: a box that is not running reports timings only.
  BoxMetrics metrics();
  void set_counters(std::shared_ptr<core::RuntimeCounters> c) { counters_ = std::move(c); }
  bool auto_remove() const { return auto_remove_; }
  bool detach() const { return record_.detach; }

 private:
  // record=false: the caller forgets the box's row next (destroy), so no "stopped"
  // write goes to the store first.
  void stop_locked(int timeout_ms = kDefaultStopTimeoutMs, bool record = true);
  static constexpr int kDefaultStopTimeoutMs = 15000;
  void persist();
  // The one way the box's state changes (boxlite/lifecycle.hpp): an illegal move
  // is InvalidState naming the box, its state and `op`.
  void move_to_locked(BoxState to, std::string_view op);
  void record_stopped();
  // A running box whose shim went away by itself (its main command exited, or it
  // was killed) becomes stopped, with the reason the shim left.
  void refresh_locked();
  FileLock lock_box();
  void record_timings(const engine::BootStages& stages, double start_ms);
  bool join_started_elsewhere_locked();
  // A shim this handle does not know of, alive with no record of it running: its
  // starter died before recording it (it stops itself then, ShimLaunch::commit), or
  // the row was lost. Adopted as this handle's to stop (connected if it answers,
  // its pid kept): true if there was one.
  bool adopt_unrecorded_shim_locked();
  // Before a stop or removal by a handle with no shim of its own: whatever shim the
  // box has now (a start by another process since this handle read the box's row
  // is recorded; one whose start was not is not) becomes this handle's to stop.
  void reach_current_shim_locked();
  // stop() and destroy() for the destructor: only a shim this handle knows of.
  void stop_own();
  void destroy(bool reach_current_shim);
  // The main command's finished run, when the box stopped because it exited.
  std::optional<Execution> finished_main_locked();
  std::optional<Execution> main_from_exit_record_locked();
  Execution replay_main_locked(int exit_code);
  // The connection to the running box, starting it first if needed.
  std::shared_ptr<core::ShimClient> running_client();
  // Starts a guest builtin (copy.cpp) as an exec.
  Execution exec_builtin(const std::string& name, const std::vector<std::string>& args, bool stdin_open);

  engine::ShimSpec spec_;
  std::string name_;
  std::vector<std::string> default_argv_;
  bool auto_remove_;
  bool attached_ = false;     // another process owns the box (attach)
  bool invalidated_ = false;  // stop() was called on this handle (and no start() since)
  bool removed_ = false;      // destroy() finished: nothing is left to stop or remove
  // Why the running box's shim, alive, did not answer this handle's handshake (stopped
  // with SIGSTOP, or hung): such a box is stopped by killing its shim.
  std::string unanswered_;
  // attach()'s connection; shim_pid (0: none known) is the recorded shim, which may
  // be alive and not answer.
  static std::shared_ptr<Box> attach_to_shim(engine::ShimSpec spec, pid_t shim_pid);
  // Throws Stopped when stop() invalidated this handle.
  void check_valid_locked() const;
  store::BoxRecord record_;
  std::shared_ptr<store::Store> store_;  // null: a box without a record
  std::mutex mu_;
  Child shim_;
  UniqueFd lifeline_;
  std::shared_ptr<core::ShimClient> client_;
  std::shared_ptr<core::RuntimeCounters> counters_;  // null: not counted
};

}  // namespace boxlite

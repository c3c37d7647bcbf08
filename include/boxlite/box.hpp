// A box: one isolated machine, created lazily; start() (or the first exec) boots it.
// This is the interface front ends use; a Runtime hands out its boxes as it.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "boxlite/copy.hpp"
#include "boxlite/execution.hpp"
#include "boxlite/lifecycle.hpp"
#include "boxlite/options.hpp"
#include "boxlite/snapshots.hpp"

namespace boxlite {

class Box {
 public:
  virtual ~Box() = default;
  Box(const Box &) = delete;
  Box &operator=(const Box &) = delete;

  virtual const std::string &id() const = 0;
  virtual const std::string &name() const = 0;
  virtual EngineKind engine() const = 0;
  // Refreshed from its shim: a running box whose main command exited is stopped.
  virtual BoxState state() = 0;
  // The image's entrypoint+cmd (or the box's overrides): what `run` runs by default.
  virtual const std::vector<std::string> &default_command() const = 0;
  // Whether the box's main command runs on a terminal (BoxOptions::main_tty).
  virtual bool main_tty() const = 0;
  virtual bool auto_remove() const = 0;
  virtual bool detach() const = 0;

  // Starts the box (a no-op when running). On a handle invalidated by stop(), start()
  // makes it valid again: code that does box->stop(); box->start() keeps working.
  virtual void start() = 0;
  // From its next start on, the box outlives the process that starts it (a detached
  // box). For the CLI's start and restart: a box made by a foreground `run` is not
  // detached, and would stop as the CLI exits. No effect on a running box.
  virtual void make_detached() = 0;
  // box.snapshot: create/list/get/remove/restore (boxlite/snapshots.hpp).
  SnapshotHandle snapshot() { return SnapshotHandle(*this); }
  // Refused (InvalidState) when the box stopped because its main command exited:
  // start() it again first. A command that cannot start is an Execution error whose
  // spawn_failure() says why.
  virtual Execution exec(const ExecOptions &opts) = 0;
  // Follows the main command: its output so far (from its log), then live output,
  // then its exit code. with_stdin: this caller writes its stdin (one at a time).
  // Starts a configured box; on a box whose main command has exited, returns that
  // finished run. NotFound when the box has no main command.
  virtual Execution attach(bool with_stdin = false) = 0;
  // The main command's output kept in its log (capped): the last `tail_lines`
  // lines, or all with 0.
  virtual std::vector<OutputChunk> main_log(size_t tail_lines = 0) = 0;
  // As main_log, handing each chunk to sink; with follow on a running box, then
  // goes on with live output until the main command exits or the box stops.
  virtual void logs(size_t tail_lines, bool follow, const std::function<void(const OutputChunk &)> &sink) = 0;
  // The main command's exit code once it has exited (the box then stops).
  virtual std::optional<int> main_exit_code() = 0;
  // Runs to completion and buffers output (at most kMaxBufferedOutput per stream).
  virtual BufferedResult run(const ExecOptions &opts) = 0;
  // Copies host_path into the box at box_path, or box_path out to host_path, with
  // docker cp semantics (boxlite/copy.hpp); starts the box if needed. Errors name the
  // box and the path: NotFound (a missing source, or a destination's missing
  // parent), AlreadyExists (overwrite off, or a file onto a directory),
  // InvalidArgument (a directory onto a file, an empty path), Storage (I/O),
  // Stopped. A failed copy may leave part of a directory copied.
  virtual void copy_in(const std::string &host_path, const std::string &box_path, const CopyOptions &opts = {}) = 0;
  virtual void copy_out(const std::string &box_path, const std::string &host_path, const CopyOptions &opts = {}) = 0;
  // Stops the box: the guest shuts down and the engine exits. The disk stays.
  // It also invalidates this handle: exec, run, attach, copy_in and copy_out on it
  // then fail with Stopped ("Handle invalidated after stop(). Use runtime.get() to
  // get a new handle.") until start() is called on it. Snapshot, clone and export
  // keep working (the documented restore is stop(); snapshot.restore(); get()).
  // A box that stops by itself (its main command exits) invalidates nothing.
  virtual void stop() = 0;
  // As stop(), but gives the guest at most timeout_ms to shut down before the
  // engine is killed (-1: wait as long as it takes).
  virtual void stop(int timeout_ms) = 0;
  // Whether stop() invalidated this handle (and no start() since).
  virtual bool invalidated() = 0;
  // Stops and deletes everything of the box (its directory, disk, sockets).
  virtual void destroy() = 0;
  // This run's counters and usage, and the creation and start timings by stage.
  // Never starts the box: a box that is not running reports timings only.
  virtual BoxMetrics metrics() = 0;

 protected:
  Box() = default;
};

}  // namespace boxlite

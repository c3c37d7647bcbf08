// LocalBox: a box of the local runtime (boxlite/box.hpp is the interface front
// ends use), reached through its shim. Created lazily; start() (or the first exec)
// boots it.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "boxlite/box.hpp"
#include "boxlite/copy.hpp"
#include "boxlite/execution.hpp"
#include "boxlite/lifecycle.hpp"
#include "boxlite/options.hpp"
#include "common/fd.hpp"
#include "common/file_lock.hpp"
#include "common/process.hpp"
#include "core/counters.hpp"
#include "core/shim_launch.hpp"
#include "core/snapshots.hpp"
#include "engine/spec.hpp"
#include "store/store.hpp"

namespace boxlite {
namespace engine {
class Engine;
}

class LocalBox final : public Box {
 public:
  LocalBox(engine::ShimSpec spec, std::string name, std::vector<std::string> default_argv, bool auto_remove);
  // A box with a record in the home's state store: its transitions are persisted.
  LocalBox(engine::ShimSpec spec, store::BoxRecord record, std::vector<std::string> default_argv,
           std::shared_ptr<store::Store> store);
  // A box that another process created and is running (Runtime::attach): connects
  // to its shim. Dropping it leaves the box running; it is never booted from here
  // (exec on it once it stopped is a Stopped error); stop() and destroy() still act
  // on it. Throws Stopped when its shim is gone. With its record: a recorded shim
  // that is alive but does not answer (stopped with SIGSTOP, or hung) leaves the
  // box running, which stop() and destroy() end by killing the shim and what needs
  // the connection refuses, saying why.
  static std::shared_ptr<LocalBox> attach(engine::ShimSpec spec);
  static std::shared_ptr<LocalBox> attach(engine::ShimSpec spec, store::BoxRecord record,
                                          std::shared_ptr<store::Store> store);
  ~LocalBox() override;

  // Box (boxlite/box.hpp documents each).
  const std::string& id() const override { return spec_.box_id; }
  const std::string& name() const override { return name_; }
  EngineKind engine() const override { return spec_.engine(); }
  BoxState state() override;
  const std::vector<std::string>& default_command() const override { return default_argv_; }
  bool main_tty() const override { return spec_.main_tty; }
  bool auto_remove() const override { return auto_remove_; }
  bool detach() const override { return record_.detach; }
  // A shim handed the box by LocalRuntime::create_to_start is taken here (with the
  // box's lock, held since).
  void start() override;
  void make_detached() override;
  Execution exec(const ExecOptions& opts) override;
  Execution attach(bool with_stdin = false) override;
  // The log is capped: see protocol/main_log.hpp.
  std::vector<OutputChunk> main_log(size_t tail_lines = 0) override;
  void logs(size_t tail_lines, bool follow, const std::function<void(const OutputChunk&)>& sink) override;
  std::optional<int> main_exit_code() override;
  BufferedResult run(const ExecOptions& opts) override;
  void copy_in(const std::string& host_path, const std::string& box_path, const CopyOptions& opts = {}) override;
  void copy_out(const std::string& box_path, const std::string& host_path, const CopyOptions& opts = {}) override;
  void stop() override;
  void stop(int timeout_ms) override;
  bool invalidated() override;
  void destroy() override;
  BoxMetrics metrics() override;

  // The runtime's own: where the box lives and what its shim runs.
  const std::string& dir() const { return spec_.box_dir; }
  const engine::ShimSpec& spec() const { return spec_; }
  // The box's engine, as the host side uses it (prepare_host, release, properties).
  const engine::Engine& engine_impl() const { return *engine_impl_; }
  void set_counters(std::shared_ptr<core::RuntimeCounters> c) { counters_ = std::move(c); }
  // The runtime's early shim, which a start of this box may take.
  void set_early_shim(std::shared_ptr<core::EarlyShimSlot> slot) { early_shim_ = std::move(slot); }

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

  std::unique_ptr<engine::Engine> engine_impl_;  // of spec_
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
  static std::shared_ptr<LocalBox> attach_to_shim(engine::ShimSpec spec, pid_t shim_pid);
  // Throws Stopped when stop() invalidated this handle.
  void check_valid_locked() const;
  store::BoxRecord record_;
  std::shared_ptr<store::Store> store_;  // null: a box without a record
  std::mutex mu_;
  Child shim_;
  UniqueFd lifeline_;
  std::shared_ptr<core::ShimClient> client_;
  std::shared_ptr<core::RuntimeCounters> counters_;  // null: not counted
  std::shared_ptr<core::EarlyShimSlot> early_shim_;  // null: none
};

// The LocalBox behind a Box a LocalRuntime handed out: InvalidArgument for a box
// of another runtime (there is none yet).
LocalBox& local(Box& b);
const LocalBox& local(const Box& b);

}  // namespace boxlite

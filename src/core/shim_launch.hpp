// Starting a box's shim. The shim is exec'd before it is told which box it runs
// (the box directory comes over a pipe), so a caller that knows a box start is
// coming can start it early: its exec and start (~1 ms here, most of it glibc's
// cpuid probing, which traps to the hypervisor) then overlap the caller's own
// work (the store, the image, the box's spec) instead of following it.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "boxlite/options.hpp"
#include "common/fd.hpp"
#include "common/file_lock.hpp"
#include "common/process.hpp"

namespace boxlite::core {

// The jail box disk a shim started early makes while it waits for its box
// (engine/jail/disk.hpp, prepare_warm_disk): the home's template of its size, and
// whether the box is removed when it stops. No template: none.
struct WarmDisk {
  std::string template_path;
  bool ephemeral = false;
};

// A shim process waiting for its box directory.
class ShimLaunch {
 public:
  // Spawns boxlite-shim. A detached box's shim gets a session of its own (it
  // outlives the caller's terminal) and no lifeline; an attached one gets a
  // process group of its own and dies with the lifeline's write end.
  static ShimLaunch spawn(bool detached, const WarmDisk& warm = {});

  ShimLaunch(ShimLaunch&&) noexcept = default;
  ShimLaunch& operator=(ShimLaunch&&) noexcept = default;
  // A shim never handed a box is told so (EOF) and exits, after reaping the
  // process it forked at its start (a kill would orphan that); one still here
  // after a second is killed and reaped (Child's destructor).
  ~ShimLaunch();

  bool detached() const { return detached_; }
  // Tells the shim its box; it then boots it and reports on ready().
  void hand_box_dir(const std::string& box_dir);
  // Lets it run the box's main command (it configures the box only then): the box's
  // start() says so, which may come after an early hand_box_dir (create_to_start).
  // A shim whose go never comes (EOF) gives the boot up before the box runs anything.
  void go();
  // Tells the shim the box is recorded as running (Box::start, once persisted). A
  // shim that gets EOF instead, its starter gone (killed) or failed in between,
  // stops its box: a box nothing records as running would be out of every later
  // command's reach, and a second start would boot a second shim on its layers.
  void commit();
  int ready() const { return ready_.get(); }
  Child take_process() { return std::move(process_); }
  UniqueFd take_lifeline() { return std::move(lifeline_); }

 private:
  ShimLaunch() = default;
  Child process_;
  UniqueFd box_dir_;  // write end: the box directory, then EOF
  UniqueFd ready_;    // read end: "OK ..." or "ERR ..."
  UniqueFd lifeline_;
  UniqueFd go_;  // write end: "g", or EOF
  bool detached_ = false;
};

// A runtime's early shim (boxlite::EarlyShim, RuntimeOptions::early_shim), taken
// by its next box start of the same kind. The runtime shares it with its boxes.
class EarlyShimSlot {
 public:
  explicit EarlyShimSlot(std::shared_ptr<ShimLaunch> launch) : launch_(std::move(launch)) {}
  // The shim, if the slot holds one of that kind (detached or not).
  std::optional<ShimLaunch> take(bool detached);

 private:
  std::mutex mu_;
  std::shared_ptr<ShimLaunch> launch_;
};
// The warm disk for a jail box of `disk_size_gb` in the home `home`, if that home
// has the template of that size already (a stat); none otherwise.
WarmDisk warm_disk_for(const std::string& home, uint64_t disk_size_gb, bool ephemeral);

// The process is alive and is the shim of that box directory, which a shim names in
// its command line once handed its box: not a pid recycled since.
bool is_shim_of(pid_t pid, const std::string& box_dir);

// A shim handed its box before the box's start() (Runtime::create_to_start), with
// the box's lock held since, so that no other process can start the box meanwhile:
// Box::start takes both. One dropped instead (the box could not be recorded, or goes
// unstarted) is stopped: SIGTERM, which ends a shim still booting at once (one that
// booted stops its box), then SIGKILL after 2 s; `after_stop` then removes what a
// shim killed mid-boot leaves (a jail's cgroups).
class HandedShim {
 public:
  HandedShim(ShimLaunch launch, FileLock lock, std::function<void()> after_stop);
  HandedShim(HandedShim&&) noexcept = default;
  HandedShim& operator=(HandedShim&&) = delete;
  ~HandedShim();
  ShimLaunch take_launch();
  FileLock take_lock() { return std::move(lock_); }
  double handed_at_ms() const { return handed_at_ms_; }

 private:
  std::optional<ShimLaunch> launch_;
  FileLock lock_;
  std::function<void()> after_stop_;
  double handed_at_ms_;
};

// Hands `launch` its box, `box_dir`, whose lock the caller holds, and keeps both for
// the box's start() (take_handed_shim).
void hand_and_keep(const std::string& box_dir, ShimLaunch launch, FileLock lock, std::function<void()> after_stop);
// The shim handed `box_dir` and not taken yet, if any: for the box's start(); a
// caller that only drops it stops it.
std::optional<HandedShim> take_handed_shim(const std::string& box_dir);
// The box's lock (FileLock::acquire_directory), for every taker but a start() that
// takes a handed shim: a shim handed the box in this process and never started is
// stopped first, since its lock, held by this process, would be waited on forever.
FileLock lock_box_directory(const std::string& box_dir);

}  // namespace boxlite::core

// Starting a box's shim. The shim is exec'd before it is told which box it runs
// (the box directory comes over a pipe), so a caller that knows a box start is
// coming can start it early: its exec and start (~1 ms here, most of it glibc's
// cpuid probing, which traps to the hypervisor) then overlap the caller's own
// work (the store, the image, the box's spec) instead of following it.
#pragma once

#include <optional>
#include <string>

#include "common/fd.hpp"
#include "common/process.hpp"

namespace boxlite::core {

// A shim process waiting for its box directory.
class ShimLaunch {
 public:
  // Spawns boxlite-shim. A detached box's shim gets a session of its own (it
  // outlives the caller's terminal) and no lifeline; an attached one gets a
  // process group of its own and dies with the lifeline's write end.
  static ShimLaunch spawn(bool detached);

  ShimLaunch(ShimLaunch&&) noexcept = default;
  ShimLaunch& operator=(ShimLaunch&&) noexcept = default;
  // A shim never handed a box is told so (EOF) and exits, after reaping the
  // process it forked at its start (a kill would orphan that); one still here
  // after a second is killed and reaped (Child's destructor).
  ~ShimLaunch();

  bool detached() const { return detached_; }
  // Tells the shim its box; it then boots it and reports on ready().
  void hand_box_dir(const std::string& box_dir);
  int ready() const { return ready_.get(); }
  Child take_process() { return std::move(process_); }
  UniqueFd take_lifeline() { return std::move(lifeline_); }

 private:
  ShimLaunch() = default;
  Child process_;
  UniqueFd box_dir_;  // write end: the box directory, then EOF
  UniqueFd ready_;    // read end: "OK ..." or "ERR ..."
  UniqueFd lifeline_;
  bool detached_ = false;
};

// Starts a shim now for this process's next box start (Box::start takes it when it
// wants the same kind, detached or not). For one-shot callers such as the CLI's
// `run`; one that is never used ends when the process exits.
void prestart_shim(bool detached);
// The prestarted shim, if there is one of that kind.
std::optional<ShimLaunch> take_prestarted_shim(bool detached);

}  // namespace boxlite::core

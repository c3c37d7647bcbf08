// A box: one isolated machine. Created lazily; start() (or the first exec) boots it.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/fd.hpp"
#include "common/process.hpp"
#include "core/execution.hpp"
#include "core/options.hpp"
#include "engine/spec.hpp"

namespace boxlite {

enum class BoxState { Created, Running, Stopped };
const char* box_state_name(BoxState s);

class Box {
 public:
  Box(engine::ShimSpec spec, std::string name, std::vector<std::string> default_argv, bool auto_remove);
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

  void start();
  Execution exec(const ExecOptions& opts);
  // Runs to completion and buffers output (at most kMaxBufferedOutput per stream).
  BufferedResult run(const ExecOptions& opts);
  // Stops the box: the guest shuts down and the VM exits. The disk stays.
  void stop();
  // Stops and deletes everything of the box (its directory, disk, sockets).
  void destroy();
  bool auto_remove() const { return auto_remove_; }

 private:
  void stop_locked();

  engine::ShimSpec spec_;
  std::string name_;
  std::vector<std::string> default_argv_;
  bool auto_remove_;
  std::mutex mu_;
  BoxState state_ = BoxState::Created;
  Child shim_;
  UniqueFd lifeline_;
  std::shared_ptr<core::ShimClient> client_;
};

}  // namespace boxlite

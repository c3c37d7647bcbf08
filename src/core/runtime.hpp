// The runtime: owns a home directory and creates, finds and removes boxes.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/box.hpp"
#include "core/options.hpp"
#include "core/paths.hpp"
#include "engine/spec.hpp"
#include "image/oci_layout.hpp"

namespace boxlite {

// What this host can run, and why not where it cannot (`boxlite info`).
struct EngineStatus {
  std::string name;
  bool usable = false;
  std::string reason;  // why not usable, or a note
};
struct HostInfo {
  std::string version, home, default_engine;
  std::vector<EngineStatus> engines;       // vm, jail
  std::vector<EngineStatus> accelerators;  // kvm, tcg
};

class Runtime {
 public:
  explicit Runtime(RuntimeOptions opts = {});
  const std::string& home() const { return layout_.root; }

  // Prepares a box (image, root disk, engine settings) without booting it.
  std::shared_ptr<Box> create(const BoxOptions& opts, const std::string& name = "");

  // A running box of this home that another process (or this one) created, by id:
  // connects to boxes/<id>/shim.sock. The Box does not own it (see Box::attach).
  // Throws NotFound "No such box: <id>" when the home has no such box, Stopped when
  // it exists but is not running.
  std::shared_ptr<Box> attach(const std::string& id);

  HostInfo host_info();

  // Warnings (such as falling back to TCG) go here; default: stderr.
  void set_warning_sink(std::function<void(const std::string&)> sink) { warn_ = std::move(sink); }

 private:
  std::string resolve_accel(const std::string& requested);
  void prepare_vm(engine::ShimSpec& spec, const BoxOptions& opts, const image::LocalImage& img);
  void prepare_jail(engine::ShimSpec& spec, const image::LocalImage& img);
  void warn(const std::string& msg) const;

  void load_home_config();
  std::string default_engine() const;
  std::string default_accel() const;

  core::HomeLayout layout_;
  std::string config_engine_, config_accel_;  // from <home>/config.json
  std::function<void(const std::string&)> warn_;
};

}  // namespace boxlite

// Planning a box: what BoxOptions (already validated: validate_box_options) and the
// facts the runtime gathered make of a new box's spec, with no I/O, so that a create
// reads validate -> plan -> act (runtime.cpp) and the rules are unit tested
// (tests/unit/plan_test.cpp). Preparation (core/prepare.hpp) then fills what only
// this machine knows: the image's layers or disk, QEMU, the kernel.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "boxlite/options.hpp"
#include "engine/spec.hpp"
#include "image/oci_layout.hpp"

namespace boxlite::core {

// The engine of a new box: the option, else $BOXLITE_ENGINE (`env`, "" when unset),
// else the home's config.json, else the default (vm). A bad name in the environment
// is an InvalidArgument naming BOXLITE_ENGINE.
EngineKind choose_engine(std::optional<EngineKind> option, std::string_view env, std::optional<EngineKind> config);

// What planning needs besides the options: gathered by the runtime.
struct PlanFacts {
  EngineKind engine = kDefaultEngine;  // choose_engine's answer
  std::string box_id;                  // the new box's
  std::string box_dir;
  image::ImageConfig image;  // the image's env, working directory, user and command
};

struct BoxPlan {
  // Every field but what preparation fills: the engine's part has the engine's
  // defaults (a jail's uid offset, its pids limit lowered by max_processes).
  engine::ShimSpec spec;
  // The writable layer's size: disk_size_gb GiB, or the default (a VM's overlay,
  // a jail's disk).
  uint64_t disk_bytes = 0;
  // The box's secrets are intercepted: its network needs the home's CA.
  bool needs_secrets_ca = false;
};

// Every SecurityOptions limit set must be positive (nullopt is "no limit"): both
// engines enforce them, a jail's init for the whole box, a VM's agent on each
// process it starts. Throws Error(InvalidArgument) naming the limit.
void check_security(const SecurityOptions& s);

// Throws Error(InvalidArgument) for what the options say wrong that validation
// left to it: a security limit of 0, a bad network or port (make_net_config).
BoxPlan plan_box(const BoxOptions& opts, const PlanFacts& facts);

// The image's environment with the box's on top (a box's variable replaces the
// image's of the same name, in place).
std::vector<std::string> env_list(const std::vector<std::string>& image_env, const EnvList& box_env);

// The main command, entrypoint then cmd: an entrypoint given replaces the image's
// and drops its cmd, a cmd given replaces the image's cmd; "sh" when nothing is left.
std::vector<std::string> main_command(const BoxOptions& opts, const image::ImageConfig& image);

}  // namespace boxlite::core

// One function per CLI command, each a thin layer of argument handling over core.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "core/box.hpp"
#include "core/options.hpp"
#include "core/runtime.hpp"

namespace boxlite::cli {

struct GlobalFlags {
  bool debug = false;
  std::string home;
  std::vector<std::string> registries;  // --registry, repeatable
  std::string config;                   // --config FILE
};

// The runtime options the global flags ask for: --home, and the image registries
// (--registry entries first, then --config's; none given = the home's config.json).
RuntimeOptions runtime_options(const GlobalFlags& g);

// pull.cpp, images.cpp
void add_pull_command(CLI::App& app, GlobalFlags& g, int& exit_code);
void add_image_commands(CLI::App& app, GlobalFlags& g, int& exit_code);
// snapshot create|ls|rm|restore, clone, export, import (storage.cpp)
void add_storage_commands(CLI::App& app, GlobalFlags& g, int& exit_code);

// progress.cpp: while alive, shows the runtime's pulls layer by layer on `out`
// (bytes, rate, "Already exists"), redrawn in place, when `out` is a terminal;
// prints nothing otherwise or when quiet.
class PullDisplay {
 public:
  PullDisplay(Runtime& rt, FILE* out, bool quiet = false);
  ~PullDisplay();
  PullDisplay(const PullDisplay&) = delete;
  PullDisplay& operator=(const PullDisplay&) = delete;

 private:
  struct State;
  Runtime& rt_;
  std::shared_ptr<State> state_;
};

// Each registers its subcommand; the callback sets the process exit code.
void add_run_command(CLI::App& app, GlobalFlags& g, int& exit_code);
void add_info_command(CLI::App& app, GlobalFlags& g, int& exit_code);
void add_cp_command(CLI::App& app, GlobalFlags& g, int& exit_code);
void add_logs_command(CLI::App& app, GlobalFlags& g, int& exit_code);
void add_stats_command(CLI::App& app, GlobalFlags& g, int& exit_code);
// create, start, stop, restart, rm, list/ls/ps, inspect, exec (boxes.cpp)
void add_box_commands(CLI::App& app, GlobalFlags& g, int& exit_code);

// box_flags.cpp: the flags `run` and `create` share.
struct BoxFlags {
  std::string image, name, workdir, user, entrypoint, engine, kernel;
  std::vector<std::string> cmd, env;
  std::optional<int> cpus, memory;              // unset: the runtime's defaults
  std::string network;                          // --network enabled|disabled
  std::vector<std::string> allow_net, publish;  // --allow-net HOST, -p [host:]guest[/tcp|udp]
  std::vector<std::string> volumes;             // -v HOST:GUEST[:ro|:rw]
  std::optional<int64_t> disk_size_gb;          // --disk-size GB
  std::string security;                         // --security enable|disable ("": enable)
};
// -p [[host_ip:]host_port:]guest_port[/tcp|udp]; throws Error(InvalidArgument).
PortSpec parse_publish(const std::string& text);
void add_box_flags(CLI::App* c, BoxFlags& f);
// Clamps --cpus over 255 with a warning, as documented.
BoxOptions box_options_from(const BoxFlags& f);

// attach.cpp: shared by run and exec.
EnvList parse_env(const std::vector<std::string>& items);
// Streams the command's output here, forwards stdin (-i), signals and resizes.
ExecResult run_attached(Box& box, ExecOptions e, bool interactive, bool tty);
// The same for any stream `open` starts (an exec, or attaching to the main command).
ExecResult follow(Box& box, const std::function<Execution()>& open, bool interactive, bool tty);
// This terminal's size, when stdin is one (unchanged otherwise).
void terminal_size(unsigned& rows, unsigned& cols);
// 128+N for death by signal N, as shells report it.
int exit_code_for_result(const ExecResult& r);
// --debug: every step of boxlite's own processes, timed, on stderr (the trace of
// common/trace.hpp; a box's shim writes its steps to its shim.log), and error codes
// named by report_error.
void enable_debug_output();
// Prints "Error: ..." and maps a failure to docker's exit codes (125/126/127).
int report_error(const Error& e);
// The exit code report_error gives: 125, or 126/127 for a command that could not start.
int exit_code_for_error(const Error& e);

// Exit codes for failures of boxlite itself, as docker uses them.
inline constexpr int kExitRuntimeError = 125;

}  // namespace boxlite::cli

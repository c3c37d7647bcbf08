// One function per CLI command, each a thin layer of argument handling over core.
#pragma once

#include <CLI/CLI.hpp>
#include <charconv>
#include <cstdio>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "boxlite/box.hpp"
#include "boxlite/error.hpp"
#include "boxlite/options.hpp"
#include "boxlite/runtime.hpp"

namespace boxlite::cli {

struct GlobalFlags {
  bool debug = false;
  std::string home;
  std::vector<std::string> registries;  // --registry, repeatable
  std::string config;                   // --config FILE
  // An attached run's shim, started first thing (main.cpp) for the run's runtime.
  EarlyShim early_shim;
};

// global_flags.cpp. Whether `arg` is a global option whose value is the next
// argument (--home DIR, --url URL); whether it is any global option (--debug,
// --home=DIR, --help, ...). For the scans of argv before CLI11's parse.
bool is_global_option_with_value(std::string_view arg);
bool is_global_option(std::string_view arg);
// The documented remote selection (--url, --profile, --path-prefix), which this build
// does not have yet: each, wherever it is given, is refused (Unsupported) as soon as
// it is read, before any command runs.
void add_remote_flags(CLI::App& app);
// BOXLITE_REST_URL set asks for remote mode as --url does: refused (Unsupported).
void refuse_remote_environment();

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
// A command line boxlite cannot take (an unknown command or flag, a bad value), as
// docker's usage errors.
inline constexpr int kExitUsageError = 125;
// A box (or a snapshot of it) that is not there, for every command that takes a box,
// as docker's "No such container".
inline constexpr int kExitNoSuchBox = 1;

// usage.cpp. The CLI reference's commands this build does not have yet
// ("serve, auth, ..."), and whether `name` is one.
bool is_documented_missing_command(std::string_view name);
std::string documented_missing_commands();
// "Error: unknown command 'x'", or that it is documented but not in this build, or
// (when an unknown flag came just before it) that the flag is unknown; 125.
int report_command_not_here(std::string_view command, std::string_view unknown_flag_before);
// A CLI11 parse error as every other error ("Error: ..."), 125; --help and --version
// print what they print, 0.
int report_usage_error(CLI::App& app, const CLI::ParseError& e);
// report_error for a command that takes a box: NotFound (no such box) exits 1.
int report_box_error(const Error& e);

// For an option that takes a whole number of type T (`->transform(...)`: it runs
// before the option's checks and CLI11's conversion): "--cpus: expected a whole
// number, got 'abc'" instead of CLI11's "Could not convert". The value is passed on
// in decimal, so that CLI11 does not read "010" as octal or "0x10" as hex.
template <typename T>
CLI::Validator whole_number() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        T n{};
        const char* end = value.data() + value.size();
        auto [at, ec] = std::from_chars(value.data(), end, n);
        if (ec == std::errc::result_out_of_range) {
          return "expected a whole number from " + std::to_string(std::numeric_limits<T>::min()) + " to " +
                 std::to_string(std::numeric_limits<T>::max()) + ", got '" + value + "'";
        }
        if (ec != std::errc() || at != end || value.empty()) return "expected a whole number, got '" + value + "'";
        value = std::to_string(n);
        return {};
      },
      "");
}

}  // namespace boxlite::cli

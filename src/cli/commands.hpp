// One function per CLI command, each a thin layer of argument handling over core.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace boxlite::cli {

struct GlobalFlags {
  bool debug = false;
  std::string home;
};

// Each registers its subcommand; the callback sets the process exit code.
void add_run_command(CLI::App& app, GlobalFlags& g, int& exit_code);
void add_info_command(CLI::App& app, GlobalFlags& g, int& exit_code);
void add_cp_command(CLI::App& app, GlobalFlags& g, int& exit_code);

// Exit codes for failures of boxlite itself, as docker uses them.
inline constexpr int kExitRuntimeError = 125;
inline constexpr int kExitCannotInvoke = 126;
inline constexpr int kExitNotFound = 127;

}  // namespace boxlite::cli

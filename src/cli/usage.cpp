// What the CLI says about a command line it cannot take, and the exit codes of
// commands over existing boxes (docs/cli.md, "Exit codes").
#include <array>
#include <cstdio>
#include <string>

#include "commands.hpp"

namespace boxlite::cli {
namespace {

// The CLI reference's commands (seeds/002, "Command synopsis") that this build
// does not have yet.
constexpr std::array<std::string_view, 5> kDocumentedMissingCommands = {"serve", "auth", "completion", "network",
                                                                        "volume"};

// "boxlite snapshot create": the command line's subcommands as far as CLI11 took them.
std::string command_path(CLI::App& app) {
  std::string path = "boxlite";
  for (CLI::App* at = &app;;) {
    auto parsed = at->get_subcommands();
    if (parsed.empty()) return path;
    at = parsed.back();
    path += " " + at->get_name();
  }
}

}  // namespace

bool is_documented_missing_command(std::string_view name) {
  for (std::string_view c : kDocumentedMissingCommands) {
    if (c == name) return true;
  }
  return false;
}

std::string documented_missing_commands() {
  std::string out;
  for (std::string_view c : kDocumentedMissingCommands) out += (out.empty() ? "" : ", ") + std::string(c);
  return out;
}

int report_command_not_here(std::string_view command, std::string_view unknown_flag_before) {
  std::string what;
  if (is_documented_missing_command(command)) {
    what = "'" + std::string(command) + "' is a documented boxlite command that this build does not have yet";
  } else if (!unknown_flag_before.empty()) {
    // `--api-key KEY ps`: KEY is more likely the flag's value than a command.
    what = "unknown flag '" + std::string(unknown_flag_before) + "'";
  } else {
    what = "unknown command '" + std::string(command) + "'";
  }
  std::fprintf(stderr, "Error: %s (see boxlite --help)\n", what.c_str());
  return kExitUsageError;
}

int report_usage_error(CLI::App& app, const CLI::ParseError& e) {
  if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
  std::fprintf(stderr, "Error: %s (see %s --help)\n", e.what(), command_path(app).c_str());
  return kExitUsageError;
}

int report_box_error(const Error& e) {
  int code = report_error(e);
  // The box named is not there: as docker's "No such container", whatever the command.
  if (e.kind() == ErrorKind::NotFound && e.spawn_failure() == SpawnFailure::None) return kExitNoSuchBox;
  return code;
}

}  // namespace boxlite::cli

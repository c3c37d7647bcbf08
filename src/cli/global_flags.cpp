// The global flags as the reference documents them (--debug, --home, --registry,
// --config, --url, --profile, --path-prefix), for the scans of argv that run before
// CLI11 does, and the remote mode this build does not have yet.
#include <algorithm>
#include <array>
#include <cstdlib>
#include <string>

#include "commands.hpp"

namespace boxlite::cli {
namespace {

// The remote selection (seeds/002, "Local vs. remote selection logic"): each picks
// the REST service instead of the local runtime.
constexpr std::array<std::string_view, 3> kRemoteFlags = {"--url", "--profile", "--path-prefix"};

constexpr std::array<std::string_view, 3> kLocalFlagsWithValue = {"--home", "--registry", "--config"};

Error remote_mode_missing(std::string_view what, std::string_view what_to_do) {
  return Error(ErrorKind::Unsupported,
               std::string(what) + " (remote mode) is not available in this build yet: " + std::string(what_to_do));
}

}  // namespace

bool is_global_option_with_value(std::string_view arg) {
  auto in = [arg](const auto& flags) { return std::find(flags.begin(), flags.end(), arg) != flags.end(); };
  return in(kLocalFlagsWithValue) || in(kRemoteFlags);
}

bool is_global_option(std::string_view arg) {
  std::string_view name = arg.substr(0, arg.find('='));
  return is_global_option_with_value(name) || name == "--debug" || name == "--version" || name == "--help" ||
         name == "-h";
}

void add_remote_flags(CLI::App& app) {
  for (std::string_view flag : kRemoteFlags) {
    std::string name(flag);
    // Refused as soon as it is read, before any command runs (CLI11 runs the
    // commands' callbacks only after the whole command line is parsed).
    app.add_option_function<std::string>(
           name,
           [name](const std::string&) {
             throw remote_mode_missing(name, "this boxlite drives the local runtime only; leave " + name + " out");
           },
           "Remote REST service selection (documented; not in this build yet)")
        ->allow_extra_args(false)
        ->trigger_on_parse();
  }
}

void refuse_remote_environment() {
  // Any URL selects remote mode (an empty one is taken for none). The
  // profile and the route prefix select nothing without one.
  const char* url = std::getenv("BOXLITE_REST_URL");
  if (url && *url) throw remote_mode_missing("BOXLITE_REST_URL", "unset it to drive the local runtime");
}

}  // namespace boxlite::cli

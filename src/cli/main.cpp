// boxlite: the command-line front end over the core library.
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <string>
#include <string_view>

#include "cli/commands.hpp"
#include "cli/linked_libraries.hpp"
#include "common/error.hpp"
#include "common/trace.hpp"
#include "core/options.hpp"
#include "core/paths.hpp"
#include "core/shim_launch.hpp"
#include "store/store.hpp"

namespace {

using Registrar = void (*)(CLI::App&, boxlite::cli::GlobalFlags&, int&);

// The first argument that is neither a global flag nor a global option's value.
std::string_view subcommand_in(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "--") break;
    if (a == "--home" || a == "--registry" || a == "--config") {
      ++i;
      continue;
    }
    if (!a.starts_with("-")) return a;
  }
  return {};
}

// Whether a `run` command line asks for a detached box: -d, --detach, or a cluster
// of short flags with a d in it (-dit). Its options' values could look like one too
// (-e -d): then a run takes it for detached, which only forgoes the early start below.
bool run_detaches(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "--") break;
    if (a == "--detach" || a.starts_with("--detach=")) return true;
    if (a.size() > 1 && a[0] == '-' && a[1] != '-' && a.find('=') == std::string_view::npos &&
        a.find('d') != std::string_view::npos) {
      return true;
    }
  }
  return false;
}

// What a `run` command line says of its box's disk, for the shim spawned before it
// is parsed to make while this process works (core::WarmDisk): a jail box
// (--engine jail, or BOXLITE_ENGINE=jail) in --home or the default home, of
// --disk-size-gb or the default size, removed (--rm) or not. A guess: a wrong one
// (a word of the box's command taken for a flag, the engine from the home's
// config) only costs the shim a disk it lets go.
boxlite::core::WarmDisk warm_disk_for_run(int argc, char** argv) {
  std::string home = boxlite::core::default_home(), engine, size;
  if (const char* e = std::getenv("BOXLITE_ENGINE")) engine = e;
  bool rm = false;
  auto value_of = [&](int& i, std::string_view a, std::string_view name, std::string& out) {
    if (a == name && i + 1 < argc) {
      out = argv[++i];
      return true;
    }
    if (a.size() > name.size() && a.starts_with(name) && a[name.size()] == '=') {
      out = a.substr(name.size() + 1);
      return true;
    }
    return false;
  };
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "--") break;
    if (value_of(i, a, "--home", home) || value_of(i, a, "--engine", engine) ||
        value_of(i, a, "--disk-size-gb", size) || value_of(i, a, "--disk-size", size)) {
      continue;
    }
    rm = rm || a == "--rm";
  }
  uint64_t gb = boxlite::kDefaultDiskSizeGb;
  if (!size.empty()) {
    char* end = nullptr;
    gb = std::strtoull(size.c_str(), &end, 10);
    if (*end != '\0') return {};
  }
  if (engine != "jail") return {};
  return boxlite::core::warm_disk_for(home, gb, rm);
}

// The group of commands that defines `name`, or nullptr.
Registrar registrar_of(std::string_view name) {
  using namespace boxlite::cli;
  struct Group {
    std::initializer_list<std::string_view> names;
    Registrar add;
  };
  static const Group kGroups[] = {
      {{"run"}, add_run_command},
      {{"info"}, add_info_command},
      {{"cp"}, add_cp_command},
      {{"logs"}, add_logs_command},
      {{"stats"}, add_stats_command},
      {{"create", "start", "stop", "restart", "rm", "list", "ls", "ps", "inspect", "exec"}, add_box_commands},
      {{"pull"}, add_pull_command},
      {{"images", "rmi", "image"}, add_image_commands},
      {{"snapshot", "clone", "export", "import"}, add_storage_commands},
  };
  for (const auto& group : kGroups) {
    for (std::string_view n : group.names) {
      if (n == name) return group.add;
    }
  }
  return nullptr;
}

// Given before the subcommand, --debug is on before the first trace and the shim's
// fork. After it, the parser turns it on (the flag's callback): only where CLI11
// takes it for the global flag, not as a word of the box's command.
void enable_debug_output_given_first(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "--debug") return boxlite::cli::enable_debug_output();
    if (a == "--home" || a == "--registry" || a == "--config") {
      ++i;
      continue;
    }
    if (!a.starts_with("-") || a == "--") return;  // the subcommand
  }
}

}  // namespace

int main(int argc, char** argv) {
  enable_debug_output_given_first(argc, argv);
  boxlite::trace("cli: main");
  // This executable's SQLite is its own (linked statically).
  boxlite::store::zero_wal_index_instead_of_truncating();
#ifdef BOXLITE_STATIC_CLI
  boxlite::cli::use_linked_libraries();
#endif
  // An attached run's shim is spawned first thing (core/shim_launch.hpp), so that its
  // exec and start overlap the parsing, the store and the image. The run takes it
  // (cli/run.cpp); anything else (a bad flag, --help) lets it go at exit.
  if (subcommand_in(argc, argv) == "run" && !run_detaches(argc, argv)) {
    try {
      boxlite::core::prestart_shim(/*detached=*/false, warm_disk_for_run(argc, argv));
      boxlite::trace("cli: shim spawned");
    } catch (const boxlite::Error&) {
      // The run starts one itself, and says why if it cannot.
    }
  }
  using namespace boxlite::cli;
  CLI::App app{"boxlite: sandboxes for AI agents, each box its own microVM", "boxlite"};
  app.set_version_flag("--version", std::string("boxlite ") + BOXLITE_VERSION);
  app.require_subcommand(1);
  app.fallthrough();  // global flags (--home, --debug) also after the subcommand
  GlobalFlags g;
  app.add_flag_callback(
         "--debug",
         [&g] {
           g.debug = true;
           boxlite::cli::enable_debug_output();
         },
         "Every step timed on stderr, and error codes named")
      ->configurable(false);
  app.add_option("--home", g.home, "Home directory (default $BOXLITE_HOME or ~/.boxlite)")->envname("BOXLITE_HOME");
  app.add_option(
         "--registry", g.registries,
         "Image registry HOST[:PORT][,transport=http][,skip_verify][,search=false] (repeatable; before --config's)")
      ->allow_extra_args(false);  // one value per --registry, also after the subcommand
  app.add_option("--config", g.config, "JSON config file with image_registries");
  int exit_code = 0;
  // Defining every command's options costs ~0.35 ms (CLI11 allocates for each), a
  // tenth of a whole `boxlite --version`: only the group that defines the command
  // named is built. With none recognised (help, a typo) all are, so CLI11 lists
  // and checks them as usual.
  std::string_view command = subcommand_in(argc, argv);
  if (Registrar add = registrar_of(command)) {
    add(app, g, exit_code);
  } else if (!command.empty() && command != "help") {
    std::fprintf(stderr, "Error: unknown command '%.*s' (see boxlite --help)\n", static_cast<int>(command.size()),
                 command.data());
    return 2;
  } else {
    for (Registrar all : {add_run_command, add_info_command, add_cp_command, add_logs_command, add_stats_command,
                          add_box_commands, add_pull_command, add_image_commands, add_storage_commands}) {
      all(app, g, exit_code);
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  } catch (const boxlite::Error& e) {
    std::fprintf(stderr, "Error: %s\n", e.what());
    return kExitRuntimeError;
  } catch (const std::exception& e) {
    // A failure no command expected (a library's own exception): said, and the
    // stack unwound, so that every guard on the way cleans up what it made.
    std::fprintf(stderr, "Error: %s\n", e.what());
    return kExitRuntimeError;
  }
  boxlite::trace("cli: exiting");
  return exit_code;
}

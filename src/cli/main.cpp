// boxlite: the command-line front end over the core library.
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <string>
#include <string_view>

#include "boxlite/error.hpp"
#include "boxlite/options.hpp"
#include "boxlite/static_link.hpp"
#include "boxlite/trace.hpp"
#include "commands.hpp"

namespace {

using Registrar = void (*)(CLI::App&, boxlite::cli::GlobalFlags&, int&);

// The first argument that is neither a global flag nor a global option's value (the
// command CLI11 will take), and an unknown flag just before it, if there is one.
struct CommandWord {
  std::string_view name;
  std::string_view unknown_flag_before;
  int index = 0;  // in argv
};
CommandWord command_word(int argc, char** argv) {
  std::string_view previous;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "--") break;
    if (boxlite::cli::is_global_option_with_value(a)) {
      ++i;
      previous = {};
      continue;
    }
    if (!a.starts_with("-")) {
      bool unknown = !previous.empty() && !boxlite::cli::is_global_option(previous) &&
                     previous.find('=') == std::string_view::npos;
      return {a, unknown ? previous : std::string_view{}, i};
    }
    previous = a;
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
// is parsed to make while this process works (boxlite::EarlyShimGuess): a jail box
// (--engine jail, or BOXLITE_ENGINE=jail) in --home or the default home, of
// --disk-size-gb or the default size, removed (--rm) or not. A guess: a wrong one
// (a word of the box's command taken for a flag, the engine from the home's
// config) only costs the shim a disk it lets go.
boxlite::EarlyShimGuess early_shim_guess_for_run(int argc, char** argv) {
  std::string home, engine, size;
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
  boxlite::EarlyShimGuess guess{.home_dir = home, .auto_remove = rm};
  if (!engine.empty()) guess.engine = boxlite::engine_kind_from_name(engine);
  if (!size.empty()) {
    char* end = nullptr;
    guess.disk_size_gb = std::strtoull(size.c_str(), &end, 10);
    if (*end != '\0') guess.disk_size_gb = 0;
  }
  return guess;
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
    if (boxlite::cli::is_global_option_with_value(a)) {
      ++i;
      continue;
    }
    if (!a.starts_with("-") || a == "--") return;  // the subcommand
  }
}

// `boxlite help [COMMAND]`, as clap has it: the help of boxlite or of COMMAND.
int print_help(CLI::App& app, std::string_view topic) {
  if (topic.empty()) {
    std::fputs(app.help().c_str(), stdout);
    return 0;
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    if (sub->check_name(std::string(topic))) {
      std::fputs(sub->help().c_str(), stdout);
      return 0;
    }
  }
  return boxlite::cli::report_command_not_here(topic, {});
}

}  // namespace

int main(int argc, char** argv) {
  enable_debug_output_given_first(argc, argv);
  boxlite::trace("cli: main");
  // This executable's SQLite is its own (linked statically).
  boxlite::zero_wal_index_instead_of_truncating();
#ifdef BOXLITE_STATIC_CLI
  boxlite::use_linked_libarchive();
#endif
  using namespace boxlite::cli;
  // Defining every command's options costs ~0.35 ms (CLI11 allocates for each), a
  // tenth of a whole `boxlite --version`: only the group that defines the command
  // named is built. With none named (--help, --version) all are, so CLI11 lists
  // them as usual.
  CommandWord command = command_word(argc, argv);
  Registrar add = registrar_of(command.name);
  if (!add && !command.name.empty() && command.name != "help") {
    return report_command_not_here(command.name, command.unknown_flag_before);
  }
  if (add) {
    try {
      refuse_remote_environment();
    } catch (const boxlite::Error& e) {
      return report_error(e);
    }
  }
  // An attached run's shim is spawned first thing (boxlite::EarlyShim), so that its
  // exec and start overlap the parsing, the store and the image. The run's runtime
  // takes it (run.cpp); anything else (a bad flag, --help) lets it go at exit.
  GlobalFlags g;
  if (command.name == "run" && !run_detaches(argc, argv)) {
    try {
      g.early_shim = boxlite::EarlyShim::start(/*detached=*/false, early_shim_guess_for_run(argc, argv));
      boxlite::trace("cli: shim spawned");
    } catch (const boxlite::Error&) {
      // The run starts one itself, and says why if it cannot.
    }
  }
  CLI::App app{"boxlite: sandboxes for AI agents, each box its own microVM", "boxlite"};
  app.set_version_flag("--version", std::string("boxlite ") + BOXLITE_VERSION);
  app.require_subcommand(0, 1);  // none given is said below
  app.fallthrough();             // global flags (--home, --debug) also after the subcommand
  app.footer("Documented, not in this build yet: the commands " + documented_missing_commands() +
             "; remote mode (--url, --profile, --path-prefix, BOXLITE_REST_URL).");
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
  add_remote_flags(app);
  int exit_code = 0;
  if (add) {
    add(app, g, exit_code);
  } else {
    for (Registrar all : {add_run_command, add_info_command, add_cp_command, add_logs_command, add_stats_command,
                          add_box_commands, add_pull_command, add_image_commands, add_storage_commands}) {
      all(app, g, exit_code);
    }
  }
  if (command.name == "help") {
    std::string_view topic = command.index + 1 < argc ? argv[command.index + 1] : "";
    return print_help(app, topic.starts_with("-") ? "" : topic);
  }
  try {
    app.parse(argc, argv);
    if (app.get_subcommands().empty()) {
      std::fprintf(stderr, "Error: no command given (see boxlite --help)\n");
      return kExitUsageError;
    }
  } catch (const CLI::ParseError& e) {
    return report_usage_error(app, e);
  } catch (const boxlite::Error& e) {
    return report_error(e);
  } catch (const std::exception& e) {
    // A failure no command expected (a library's own exception): said, and the
    // stack unwound, so that every guard on the way cleans up what it made.
    std::fprintf(stderr, "Error: %s\n", e.what());
    return kExitRuntimeError;
  }
  boxlite::trace("cli: exiting");
  return exit_code;
}

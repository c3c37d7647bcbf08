// boxlite: the command-line front end over the core library.
#include <cstdio>

#include "cli/commands.hpp"
#include "common/trace.hpp"
#include "common/error.hpp"

int main(int argc, char** argv) {
  boxlite::trace("cli: main");
  using namespace boxlite::cli;
  CLI::App app{"boxlite: sandboxes for AI agents, each box its own microVM", "boxlite"};
  app.set_version_flag("--version", std::string("boxlite ") + BOXLITE_VERSION);
  app.require_subcommand(1);
  app.fallthrough();  // global flags (--home, --debug) also after the subcommand
  GlobalFlags g;
  app.add_flag("--debug", g.debug, "Verbose diagnostics")->configurable(false);
  app.add_option("--home", g.home, "Home directory (default $BOXLITE_HOME or ~/.boxlite)")->envname("BOXLITE_HOME");
  app.add_option("--registry", g.registries, "Image registry HOST[:PORT][,transport=http][,skip_verify][,search=false] (repeatable; before --config's)");
  app.add_option("--config", g.config, "JSON config file with image_registries");
  int exit_code = 0;
  add_run_command(app, g, exit_code);
  add_info_command(app, g, exit_code);
  add_cp_command(app, g, exit_code);
  add_logs_command(app, g, exit_code);
  add_stats_command(app, g, exit_code);
  add_box_commands(app, g, exit_code);
  add_pull_command(app, g, exit_code);
  add_image_commands(app, g, exit_code);
  add_storage_commands(app, g, exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  } catch (const boxlite::Error& e) {
    std::fprintf(stderr, "Error: %s\n", e.what());
    return kExitRuntimeError;
  }
  return exit_code;
}

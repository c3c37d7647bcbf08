// boxlite info: what this host can run.
#include <cstdio>

#include "cli/commands.hpp"
#include "core/runtime.hpp"

namespace boxlite::cli {

void add_info_command(CLI::App& app, GlobalFlags& g, int& exit_code) {
  CLI::App* info = app.add_subcommand("info", "Show runtime system information");
  auto format = std::make_shared<std::string>("yaml");
  info->add_option("--format", *format, "yaml or json")->check(CLI::IsMember({"yaml", "json"}));
  info->callback([&g, &exit_code, format] {
    Runtime rt(RuntimeOptions{g.home});
    if (*format == "json") {
      std::printf("{\"version\": \"%s\", \"home\": \"%s\"}\n", BOXLITE_VERSION, rt.home().c_str());
    } else {
      std::printf("version: %s\nhome: %s\n", BOXLITE_VERSION, rt.home().c_str());
    }
    exit_code = 0;
  });
}

}  // namespace boxlite::cli

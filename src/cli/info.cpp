// boxlite info: what this host can run, and why not where it cannot.
#include <cstdio>

#include <nlohmann/json.hpp>

#include <iostream>

#include "boxlite/runtime.hpp"
#include "commands.hpp"
#include "output.hpp"

namespace boxlite::cli {
namespace {

nlohmann::json to_json(const HostInfo& h) {
  auto list = [](const std::vector<EngineStatus>& v) {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& e : v) out[e.name] = {{"usable", e.usable}, {"reason", e.reason}};
    return out;
  };
  return {{"version", h.version},
          {"home", h.home},
          {"default_engine", engine_kind_name(h.default_engine)},
          {"engines", list(h.engines)},
          {"accelerators", list(h.accelerators)}};
}

}  // namespace

void add_info_command(CLI::App& app, GlobalFlags& g, int& exit_code) {
  CLI::App* info = app.add_subcommand("info", "Show runtime system information: engines and accelerators");
  auto format = std::make_shared<std::string>("yaml");
  info->add_option("--format", *format, "yaml (default) or json")->check(CLI::IsMember({"yaml", "json"}));
  info->callback([&g, &exit_code, format] {
    Runtime rt(runtime_options(g));
    nlohmann::json j = to_json(rt.host_info());
    if (*format == "json") {
      std::printf("%s\n", j.dump(2).c_str());
    } else {
      print_yaml(j, std::cout);
    }
    exit_code = 0;
  });
}

}  // namespace boxlite::cli

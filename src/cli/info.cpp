// boxlite info: what this host can run, and why not where it cannot.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "core/runtime.hpp"

namespace boxlite::cli {
namespace {

nlohmann::json to_json(const HostInfo& h) {
  auto list = [](const std::vector<EngineStatus>& v) {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& e : v) out[e.name] = {{"usable", e.usable}, {"reason", e.reason}};
    return out;
  };
  return {{"version", h.version}, {"home", h.home}, {"default_engine", h.default_engine},
          {"engines", list(h.engines)}, {"accelerators", list(h.accelerators)}};
}

// YAML for the few shapes above (strings, bools, nested objects).
void print_yaml(const nlohmann::json& j, int indent) {
  for (const auto& [key, value] : j.items()) {
    std::printf("%*s%s:", indent, "", key.c_str());
    if (value.is_object()) {
      std::printf("\n");
      print_yaml(value, indent + 2);
    } else if (value.is_boolean()) {
      std::printf(" %s\n", value.get<bool>() ? "true" : "false");
    } else {
      std::printf(" %s\n", nlohmann::json(value.get<std::string>()).dump().c_str());
    }
  }
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
      print_yaml(j, 0);
    }
    exit_code = 0;
  });
}

}  // namespace boxlite::cli

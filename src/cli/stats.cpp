// boxlite stats BOX [--format table|json|yaml] [-s|--stream]: a box's metrics
// (usage and counters of this run, creation and boot timings by stage).
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "boxlite/error.hpp"
#include "boxlite/runtime.hpp"
#include "commands.hpp"
#include "output.hpp"

namespace boxlite::cli {
namespace {

struct StatsFlags {
  std::string box, format = "table";
  bool stream = false;
};

nlohmann::json metrics_json(const Box& box, const BoxMetrics& m, std::string_view status) {
  auto opt = [](const std::optional<int64_t>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
  return {{"id", box.id()},
          {"name", box.name()},
          {"status", status},
          {"cpu_percent", m.cpu_percent},
          {"memory_bytes", m.memory_bytes},
          {"commands_executed_total", m.commands_executed_total},
          {"exec_errors_total", m.exec_errors_total},
          {"network_bytes_sent", m.network_bytes_sent},
          {"network_bytes_received", m.network_bytes_received},
          {"network_tcp_connections", m.network_tcp_connections},
          {"network_tcp_errors", m.network_tcp_errors},
          {"total_create_duration_ms", m.total_create_duration_ms},
          {"guest_boot_duration_ms", m.guest_boot_duration_ms},
          {"stage_filesystem_setup_ms", opt(m.stage_filesystem_setup_ms)},
          {"stage_image_prepare_ms", opt(m.stage_image_prepare_ms)},
          {"stage_guest_rootfs_ms", opt(m.stage_guest_rootfs_ms)},
          {"stage_box_spawn_ms", opt(m.stage_box_spawn_ms)},
          {"stage_container_init_ms", opt(m.stage_container_init_ms)}};
}

void print_table(const Box& box, const BoxMetrics& m) {
  std::printf("%-14s %-20s %-8s %-12s %-10s %-12s %-21s %s\n", "ID", "NAME", "CPU %", "MEM USAGE", "COMMANDS",
              "EXEC ERRORS", "NET I/O", "BOOT");
  char cpu[16];
  std::snprintf(cpu, sizeof cpu, "%.2f%%", m.cpu_percent);
  std::string net = human_size(static_cast<double>(m.network_bytes_received), Units::Binary) + " / " +
                    human_size(static_cast<double>(m.network_bytes_sent), Units::Binary);
  std::printf("%-14s %-20s %-8s %-12s %-10llu %-12llu %-21s %lld ms\n", box.id().c_str(), box.name().c_str(), cpu,
              human_size(static_cast<double>(m.memory_bytes), Units::Binary).c_str(),
              static_cast<unsigned long long>(m.commands_executed_total),
              static_cast<unsigned long long>(m.exec_errors_total), net.c_str(),
              static_cast<long long>(m.guest_boot_duration_ms));
}

int stats(const GlobalFlags& g, const StatsFlags& f) {
  Runtime rt(runtime_options(g));
  auto box = rt.get(f.box);
  if (!box) throw rt.no_such_box(f.box);
  for (bool first = true;; first = false) {
    BoxState state = box->state();
    BoxMetrics m = box->metrics();
    if (f.stream && !first && f.format == "table" && ::isatty(1)) std::printf("\033[2J\033[H");  // redraw in place
    if (f.format == "table") {
      print_table(*box, m);
    } else if (f.format == "json") {
      std::printf("%s\n", metrics_json(*box, m, box_state_name(state)).dump(f.stream ? -1 : 2).c_str());
    } else {
      if (f.stream) std::cout << "---\n";
      print_yaml(metrics_json(*box, m, box_state_name(state)), std::cout);
    }
    std::fflush(stdout);
    // A stream ends with the box (or with the user's ^C).
    if (!f.stream || state != BoxState::Running) return 0;
    ::sleep(1);
  }
}

}  // namespace

void add_stats_command(CLI::App& app, GlobalFlags& g, int& exit_code) {
  auto f = std::make_shared<StatsFlags>();
  CLI::App* c = app.add_subcommand("stats", "Show a box's resource usage, counters and boot timings");
  c->add_option("box", f->box, "Box ID or name")->required();
  c->add_option("--format", f->format, "table (default), json or yaml")
      ->check(CLI::IsMember({"table", "json", "yaml"}));
  c->add_flag("-s,--stream", f->stream, "Refresh every second until the box stops");
  c->callback([f, &g, &exit_code] {
    try {
      exit_code = stats(g, *f);
    } catch (const Error& e) {
      exit_code = report_box_error(e);
    }
  });
}

}  // namespace boxlite::cli

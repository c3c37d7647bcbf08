#include "engine/spec.hpp"

#include <nlohmann/json.hpp>

#include "common/error.hpp"

namespace boxlite::engine {

std::string spec_to_json(const ShimSpec& s) {
  nlohmann::json j = {
      {"box_id", s.box_id},
      {"box_dir", s.box_dir},
      {"engine", engine_kind_name(s.engine)},
      {"accel", s.accel},
      {"qemu", s.qemu},
      {"kernel", s.kernel},
      {"initramfs", s.initramfs},
      {"kernel_cmdline_extra", s.kernel_cmdline_extra},
      {"acpi", s.acpi},
      {"tcg_cpu", s.tcg_cpu},
      {"disk", s.disk},
      {"disk_base", s.disk_base},
      {"lower_dirs", s.lower_dirs},
      {"root_mountpoint", s.root_mountpoint},
      {"uid_offset", s.uid_offset},
      {"pids_limit", s.pids_limit},
      {"ephemeral", s.ephemeral},
      {"guest_binary", s.guest_binary},
      {"cpus", s.cpus},
      {"memory_mib", s.memory_mib},
      {"boot_timeout_secs", s.boot_timeout_secs},
      {"hostname", s.hostname},
      {"env", s.env},
      {"working_dir", s.working_dir},
      {"user", s.user},
      {"net", nlohmann::json::parse(net::config_to_json(s.net))},
  };
  j["volumes"] = nlohmann::json::array();
  for (const auto& v : s.volumes)
    j["volumes"].push_back({{"host", v.host_path}, {"guest", v.guest_path}, {"read_only", v.read_only}});
  j["security"] = {{"seccomp", s.seccomp},    {"nofile", s.rlimit_nofile}, {"fsize", s.rlimit_fsize},
                   {"nproc", s.rlimit_nproc}, {"as", s.rlimit_as},         {"cpu", s.rlimit_cpu}};
  // The jail engine's own part (ShimSpec's jail section).
  j["jail"] = {{"disk_bytes", s.jail_disk_bytes},
               {"disk_mountpoint", s.jail_disk_mountpoint},
               {"disk_template", s.jail_disk_template}};
  j["main"] = {{"argv", s.main_argv},
               {"tty", s.main_tty},
               {"stdin", s.main_stdin},
               {"rows", s.main_rows},
               {"cols", s.main_cols}};
  return j.dump(2);
}

ShimSpec spec_from_json(const std::string& text) {
  try {
    auto j = nlohmann::json::parse(text);
    ShimSpec s;
    s.box_id = j.at("box_id");
    s.box_dir = j.at("box_dir");
    s.engine = parse_engine_kind(j.at("engine").get<std::string>(), "shim.json");
    s.accel = j.at("accel");
    s.qemu = j.at("qemu");
    s.kernel = j.at("kernel");
    s.initramfs = j.at("initramfs");
    s.kernel_cmdline_extra = j.at("kernel_cmdline_extra");
    s.acpi = j.at("acpi");
    s.tcg_cpu = j.at("tcg_cpu");
    s.disk = j.at("disk");
    s.disk_base = j.at("disk_base");
    s.lower_dirs = j.at("lower_dirs").get<std::vector<std::string>>();
    s.root_mountpoint = j.value("root_mountpoint", "");
    s.uid_offset = j.at("uid_offset");
    s.pids_limit = j.at("pids_limit");
    s.ephemeral = j.value("ephemeral", false);
    s.guest_binary = j.at("guest_binary");
    s.cpus = j.at("cpus");
    s.memory_mib = j.at("memory_mib");
    s.boot_timeout_secs = j.at("boot_timeout_secs");
    s.hostname = j.at("hostname");
    s.env = j.at("env").get<std::vector<std::string>>();
    s.working_dir = j.at("working_dir");
    s.user = j.at("user");
    if (j.contains("main")) {
      const auto& m = j.at("main");
      s.main_argv = m.at("argv").get<std::vector<std::string>>();
      s.main_tty = m.at("tty");
      s.main_stdin = m.at("stdin");
      s.main_rows = m.at("rows");
      s.main_cols = m.at("cols");
    }
    if (j.contains("security")) {  // absent for a box created before it existed: the defaults
      const auto& x = j.at("security");
      s.seccomp = x.at("seccomp");
      s.rlimit_nofile = x.at("nofile");
      s.rlimit_fsize = x.at("fsize");
      s.rlimit_nproc = x.at("nproc");
      s.rlimit_as = x.at("as");
      s.rlimit_cpu = x.at("cpu");
    }
    if (j.contains("volumes")) {
      for (const auto& v : j.at("volumes")) s.volumes.push_back({v.at("host"), v.at("guest"), v.at("read_only")});
    }
    if (j.contains("jail")) {  // absent for a box created before it existed: no disk of its own
      const auto& x = j.at("jail");
      s.jail_disk_bytes = x.value("disk_bytes", uint64_t{0});
      s.jail_disk_mountpoint = x.value("disk_mountpoint", "");
      s.jail_disk_template = x.value("disk_template", "");
    }
    // A box created before networking existed has none.
    if (j.contains("net")) {
      s.net = net::config_from_json(j.at("net").dump());
    } else {
      s.net.enabled = false;
    }
    return s;
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorKind::Config, std::string("invalid shim spec: ") + e.what());
  }
}

}  // namespace boxlite::engine

#include "engine/spec.hpp"

#include <nlohmann/json.hpp>

#include "common/error.hpp"

namespace boxlite::engine {

void ShimSpec::set_engine(EngineKind kind) {
  if (kind == EngineKind::Jail) {
    engine_spec = JailSpec{};
  } else {
    engine_spec = VmSpec{};
  }
}

namespace {

[[noreturn]] void wrong_part(const ShimSpec& s, EngineKind asked) {
  throw Error(ErrorKind::Internal, "box " + s.box_id + " runs on the " + std::string(engine_kind_name(s.engine())) +
                                       " engine, not the " + std::string(engine_kind_name(asked)) + " engine");
}

void vm_to_json(nlohmann::json& j, const VmSpec& v) {
  j["accel"] = v.accel;
  j["qemu"] = v.qemu;
  j["kernel"] = v.kernel;
  j["initramfs"] = v.initramfs;
  j["kernel_cmdline_extra"] = v.kernel_cmdline_extra;
  j["acpi"] = v.acpi;
  j["tcg_cpu"] = v.tcg_cpu;
  j["disk"] = v.disk;
  j["disk_base"] = v.disk_base;
  j["guest_binary"] = v.guest_binary;
}

void jail_to_json(nlohmann::json& j, const JailSpec& x) {
  j["lower_dirs"] = x.lower_dirs;
  j["root_mountpoint"] = x.root_mountpoint;
  j["uid_offset"] = x.uid_offset;
  j["pids_limit"] = x.pids_limit;
  j["jail"] = {
      {"disk_bytes", x.disk_bytes}, {"disk_mountpoint", x.disk_mountpoint}, {"disk_template", x.disk_template}};
}

VmSpec vm_from_json(const nlohmann::json& j) {
  VmSpec v;
  v.accel = j.at("accel");
  v.qemu = j.at("qemu");
  v.kernel = j.at("kernel");
  v.initramfs = j.at("initramfs");
  v.kernel_cmdline_extra = j.at("kernel_cmdline_extra");
  v.acpi = j.at("acpi");
  v.tcg_cpu = j.at("tcg_cpu");
  v.disk = j.at("disk");
  v.disk_base = j.at("disk_base");
  v.guest_binary = j.at("guest_binary");
  return v;
}

JailSpec jail_from_json(const nlohmann::json& j) {
  JailSpec x;
  x.lower_dirs = j.at("lower_dirs").get<std::vector<std::string>>();
  x.root_mountpoint = j.value("root_mountpoint", "");
  x.uid_offset = j.at("uid_offset");
  x.pids_limit = j.at("pids_limit");
  if (j.contains("jail")) {  // absent for a box created before it existed: no disk of its own
    const auto& d = j.at("jail");
    x.disk_bytes = d.value("disk_bytes", uint64_t{0});
    x.disk_mountpoint = d.value("disk_mountpoint", "");
    x.disk_template = d.value("disk_template", "");
  }
  return x;
}

// Whether `key` of `j` says something: present and not empty (a string, a list or
// an object), or a number other than 0. What an earlier build wrote for the other
// engine's fields of every box is empty, or a scalar default, which says nothing.
bool says_something(const nlohmann::json& j, const char* key) {
  if (!j.contains(key)) return false;
  const auto& v = j.at(key);
  if (v.is_string()) return !v.get_ref<const std::string&>().empty();
  if (v.is_array() || v.is_object()) return !v.empty();
  if (v.is_number()) return v != 0;
  return !v.is_null();
}

// The other engine's keys that carry a value: the spec is refused.
void refuse_foreign_fields(const nlohmann::json& j, EngineKind engine) {
  std::vector<std::string> found;
  if (engine == EngineKind::Jail) {
    for (const char* k : {"kernel", "initramfs", "kernel_cmdline_extra", "disk", "disk_base"}) {
      if (says_something(j, k)) found.push_back(k);
    }
  } else {
    for (const char* k : {"lower_dirs", "root_mountpoint"}) {
      if (says_something(j, k)) found.push_back(k);
    }
    if (j.contains("jail")) {
      for (const char* k : {"disk_bytes", "disk_mountpoint", "disk_template"}) {
        if (says_something(j.at("jail"), k)) found.push_back(std::string("jail.") + k);
      }
    }
  }
  if (found.empty()) return;
  std::string names;
  for (const auto& f : found) names += (names.empty() ? "" : ", ") + f;
  EngineKind other = engine == EngineKind::Jail ? EngineKind::Vm : EngineKind::Jail;
  throw Error(ErrorKind::Config, "invalid shim spec: a " + std::string(engine_kind_name(engine)) +
                                     " box's spec sets the " + std::string(engine_kind_name(other)) + " engine's " +
                                     names + ": a box runs on one engine");
}

}  // namespace

VmSpec& ShimSpec::vm() {
  if (auto* v = if_vm()) return *v;
  wrong_part(*this, EngineKind::Vm);
}
const VmSpec& ShimSpec::vm() const {
  if (auto* v = if_vm()) return *v;
  wrong_part(*this, EngineKind::Vm);
}
JailSpec& ShimSpec::jail() {
  if (auto* x = if_jail()) return *x;
  wrong_part(*this, EngineKind::Jail);
}
const JailSpec& ShimSpec::jail() const {
  if (auto* x = if_jail()) return *x;
  wrong_part(*this, EngineKind::Jail);
}

std::string spec_to_json(const ShimSpec& s) {
  nlohmann::json j = {
      {"box_id", s.box_id},
      {"box_dir", s.box_dir},
      {"engine", engine_kind_name(s.engine())},
      {"ephemeral", s.ephemeral},
      {"cpus", s.cpus},
      {"memory_mib", s.memory_mib},
      {"boot_timeout_secs", s.boot_timeout_secs},
      {"hostname", s.hostname},
      {"env", s.env},
      {"working_dir", s.working_dir},
      {"user", s.user},
      {"net", nlohmann::json::parse(net::config_to_json(s.net))},
  };
  std::visit(
      [&](const auto& part) {
        if constexpr (std::is_same_v<std::decay_t<decltype(part)>, VmSpec>) {
          vm_to_json(j, part);
        } else {
          jail_to_json(j, part);
        }
      },
      s.engine_spec);
  j["volumes"] = nlohmann::json::array();
  for (const auto& v : s.volumes)
    j["volumes"].push_back({{"host", v.host_path}, {"guest", v.guest_path}, {"read_only", v.read_only}});
  j["security"] = {{"seccomp", s.seccomp},    {"nofile", s.rlimit_nofile}, {"fsize", s.rlimit_fsize},
                   {"nproc", s.rlimit_nproc}, {"as", s.rlimit_as},         {"cpu", s.rlimit_cpu}};
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
    EngineKind engine = parse_engine_kind(j.at("engine").get<std::string>(), "shim.json");
    refuse_foreign_fields(j, engine);
    if (engine == EngineKind::Jail) {
      s.engine_spec = jail_from_json(j);
    } else {
      s.engine_spec = vm_from_json(j);
    }
    s.ephemeral = j.value("ephemeral", false);
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

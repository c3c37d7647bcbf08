#include "core/plan.hpp"

#include "common/error.hpp"
#include "core/network.hpp"
#include "engine/jail/jail.hpp"

namespace boxlite::core {

namespace {

// The limits of a SecurityOptions that are set, by their documented names.
std::vector<std::pair<const char*, uint64_t>> security_limits(const SecurityOptions& s) {
  std::vector<std::pair<const char*, uint64_t>> out;
  const std::pair<const char*, const std::optional<uint64_t>*> all[] = {{"max_open_files", &s.max_open_files},
                                                                        {"max_file_size", &s.max_file_size},
                                                                        {"max_processes", &s.max_processes},
                                                                        {"max_memory", &s.max_memory},
                                                                        {"max_cpu_time", &s.max_cpu_time}};
  for (const auto& [name, v] : all) {
    if (*v) out.emplace_back(name, **v);
  }
  return out;
}

void apply_security(engine::ShimSpec& spec, const SecurityOptions& s) {
  spec.seccomp = s.seccomp;
  spec.rlimit_nofile = s.max_open_files.value_or(0);
  spec.rlimit_fsize = s.max_file_size.value_or(0);
  spec.rlimit_nproc = s.max_processes.value_or(0);
  spec.rlimit_as = s.max_memory.value_or(0);
  spec.rlimit_cpu = s.max_cpu_time.value_or(0);
  // A jail's pids cgroup is its processes' limit too (a VM's agent sets its own).
  if (auto* jail = spec.if_jail(); jail && s.max_processes && *s.max_processes < uint64_t(jail->pids_limit)) {
    jail->pids_limit = static_cast<int>(*s.max_processes);
  }
}

}  // namespace

void check_security(const SecurityOptions& s) {
  for (const auto& [name, v] : security_limits(s)) {
    if (v == 0) throw Error(ErrorKind::InvalidArgument, std::string("security ") + name + " must be > 0");
  }
}

EngineKind choose_engine(std::optional<EngineKind> option, std::string_view env, std::optional<EngineKind> config) {
  if (option) return *option;
  if (!env.empty()) return parse_engine_kind(env, "BOXLITE_ENGINE");
  return config.value_or(kDefaultEngine);
}

std::vector<std::string> env_list(const std::vector<std::string>& image_env, const EnvList& box_env) {
  std::vector<std::string> out = image_env;
  for (const auto& [k, v] : box_env) {
    std::string kv = k + "=" + v;
    bool replaced = false;
    for (auto& e : out) {
      if (e.compare(0, k.size() + 1, k + "=") == 0) {
        e = kv;
        replaced = true;
      }
    }
    if (!replaced) out.push_back(kv);
  }
  return out;
}

std::vector<std::string> main_command(const BoxOptions& opts, const image::ImageConfig& image) {
  std::vector<std::string> argv = opts.entrypoint.empty() ? image.entrypoint : opts.entrypoint;
  const auto& cmd = opts.cmd.empty() && opts.entrypoint.empty() ? image.cmd : opts.cmd;
  argv.insert(argv.end(), cmd.begin(), cmd.end());
  if (argv.empty()) argv = {"sh"};
  return argv;
}

BoxPlan plan_box(const BoxOptions& opts, const PlanFacts& facts) {
  check_security(opts.security);
  BoxPlan plan;
  engine::ShimSpec& spec = plan.spec;
  spec.set_engine(facts.engine);
  if (auto* jail = spec.if_jail()) {
    jail->uid_offset = engine::jail::kDefaultUidOffset;
    jail->pids_limit = engine::jail::kDefaultPidsLimit;
  }
  spec.box_id = facts.box_id;
  spec.box_dir = facts.box_dir;
  spec.cpus = opts.cpus.value_or(1);
  spec.memory_mib = opts.memory_mib.value_or(1024);
  apply_security(spec, opts.security);
  spec.boot_timeout_secs = opts.boot_timeout_secs;
  spec.hostname = spec.box_id;
  spec.env = env_list(facts.image.env, opts.env);
  spec.working_dir = opts.working_dir.empty() ? facts.image.working_dir : opts.working_dir;
  spec.user = opts.user.empty() ? facts.image.user : opts.user;
  spec.net = make_net_config(opts);
  // As given: the runtime resolves the host paths when it acts (a symlink swapped
  // later cannot redirect the share).
  for (const auto& v : opts.volumes) spec.volumes.push_back({v.host_path, v.guest_path, v.read_only});
  for (auto& e : secret_env(spec.net)) spec.env.push_back(std::move(e));  // placeholders only
  plan.needs_secrets_ca = !spec.net.secrets.empty() && spec.net.enabled;
  plan.disk_bytes = opts.disk_size_gb.value_or(kDefaultDiskSizeGb) << 30;
  spec.main_argv = main_command(opts, facts.image);
  spec.main_tty = opts.main_tty;
  spec.main_stdin = opts.main_stdin;
  spec.ephemeral = opts.auto_remove;
  spec.main_rows = opts.main_rows;
  spec.main_cols = opts.main_cols;
  return plan;
}

}  // namespace boxlite::core

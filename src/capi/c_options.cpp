// CBoxliteOptions and CAdvancedBoxOptions. The void setters cannot report, so a
// bad value is remembered and reported by boxlite_create_box; so is a documented
// option the core does not support yet: it is never silently dropped.
#include <cstring>
#include <string>
#include <vector>

#include "errors.hpp"
#include "options.hpp"

namespace boxlite::capi {

// A setter's bad value is reported as "box options: <option>: <what>": the
// option says which call it was, far from the create that reports it. The core's
// own checks name their field already ("cpus must be ...") and pass unchanged, as
// the CLI shows them.
BoxOptions checked_options(const CBoxliteOptions& o) {
  if (!o.invalid.empty()) invalid("box options: " + o.invalid.front());
  std::vector<std::string> unsupported = o.unsupported;
  if (o.security_disabled) {
    unsupported.push_back("disabling the security sandbox (security_enabled 0 in the advanced options)");
  }
  if (!unsupported.empty()) {
    std::string what;
    for (const auto& u : unsupported) what += (what.empty() ? "" : "; ") + u;
    throw Error(ErrorKind::Unsupported, "box options: not supported yet: " + what);
  }
  validate_box_options(o.core);
  return o.core;
}

namespace {

// args[0..argc) as strings; a bad array is remembered as invalid.
// `option` names the list ("cmd", "entrypoint").
bool copy_args(CBoxliteOptions* o, const char* option, const char* const* args, int argc,
               std::vector<std::string>& out) {
  if (argc < 0 || (argc > 0 && !args)) {
    o->invalid.push_back(std::string(option) + ": args is NULL or argc is negative");
    return false;
  }
  std::vector<std::string> v;
  for (int i = 0; i < argc; ++i) {
    if (!args[i]) {
      o->invalid.push_back(std::string(option) + ": args[" + std::to_string(i) + "] is NULL");
      return false;
    }
    v.emplace_back(args[i]);
  }
  out = std::move(v);
  return true;
}

}  // namespace
}  // namespace boxlite::capi

using namespace boxlite;
using namespace boxlite::capi;

extern "C" {

BoxliteErrorCode boxlite_options_new(const char* image, CBoxliteOptions** out_opts, CBoxliteError* out_error) {
  return guard(out_error, [&] {
    require(out_opts, "out_opts");
    *out_opts = nullptr;
    require_str(image, "image");
    auto* o = new CBoxliteOptions;
    o->core.image = image;
    *out_opts = o;
  });
}

void boxlite_options_set_cpus(CBoxliteOptions* opts, int cpus) {
  if (opts) opts->core.cpus = cpus;  // range checked at create (1..255)
}

void boxlite_options_set_memory(CBoxliteOptions* opts, int memory_mib) {
  if (opts) opts->core.memory_mib = memory_mib;
}

void boxlite_options_set_disk_size_gb(CBoxliteOptions* opts, uint64_t disk_size_gb) {
  if (!opts) return;
  if (disk_size_gb == 0) {
    opts->core.disk_size_gb.reset();
  } else {
    opts->core.disk_size_gb = disk_size_gb;
  }
}

void boxlite_options_add_bind_mount(CBoxliteOptions* opts, const char* host_path, const char* guest_path,
                                    int read_only) {
  if (!opts) return;
  try {
    if (!host_path || !*host_path || !guest_path || !*guest_path) {
      opts->invalid.push_back("volumes: a bind mount needs a non-empty host_path and guest_path");
      return;
    }
    // Checked with the other options by boxlite_create_box (core/volumes.hpp).
    opts->core.volumes.push_back({host_path, guest_path, read_only != 0});
  } catch (...) {
  }
}

BoxliteErrorCode boxlite_options_add_port(CBoxliteOptions* opts, uint16_t host_port, uint16_t guest_port,
                                          BoxlitePortProtocol protocol, const char* host_ip) {
  return guard(nullptr, [&] {
    require(opts, "opts");
    if (guest_port == 0) invalid("ports: guest_port must be 1..65535");
    // A C caller may pass any int; reading it as the C++ enum would be undefined.
    unsigned raw = 0;
    static_assert(sizeof raw == sizeof protocol);
    std::memcpy(&raw, &protocol, sizeof raw);
    if (raw != BoxlitePortProtocolTcp && raw != BoxlitePortProtocolUdp) {
      invalid("ports: protocol must be BoxlitePortProtocolTcp or BoxlitePortProtocolUdp");
    }
    PortSpec p;
    p.host_port = host_port;
    p.guest_port = guest_port;
    p.protocol = raw == BoxlitePortProtocolUdp ? "udp" : "tcp";
    p.host_ip = host_ip ? host_ip : "";
    opts->core.ports.push_back(std::move(p));
  });
}

void boxlite_options_add_secret(CBoxliteOptions* opts, const char* name, const char* value, const char* placeholder,
                                const char* const* hosts, int hosts_count) {
  if (!opts) return;
  try {
    if (!name || !*name || !value) {
      opts->invalid.push_back("secrets: a secret needs a non-empty name and a non-NULL value");
      return;
    }
    if (hosts_count < 0 || (hosts_count > 0 && !hosts)) {
      opts->invalid.push_back(std::string("secrets: secret '") + name + "': hosts is NULL or hosts_count is negative");
      return;
    }
    Secret sec;
    sec.name = name;
    sec.value = value;
    sec.placeholder = placeholder ? placeholder : "";
    for (int i = 0; i < hosts_count; ++i) {
      if (!hosts[i] || !*hosts[i]) {
        opts->invalid.push_back(std::string("secrets: secret '") + name + "': hosts[" + std::to_string(i) +
                                "] is NULL or empty");
        return;
      }
      sec.hosts.emplace_back(hosts[i]);
    }
    opts->core.secrets.push_back(std::move(sec));
  } catch (...) {
  }
}

void boxlite_options_set_network_enabled(CBoxliteOptions* opts) {
  if (opts) opts->core.network.mode = "enabled";
}

void boxlite_options_set_network_disabled(CBoxliteOptions* opts) {
  if (opts) opts->core.network.mode = "disabled";
}

void boxlite_options_add_allow_net(CBoxliteOptions* opts, const char* host) {
  if (!opts) return;
  try {
    if (!host || !*host) {
      opts->invalid.push_back("allow_net: a host is empty");
      return;
    }
    opts->core.network.allow_net.emplace_back(host);
  } catch (...) {
  }
}

void boxlite_options_set_name(CBoxliteOptions* opts, const char* name) {
  if (!opts) return;
  try {
    opts->name = name ? name : "";
  } catch (...) {
  }
}

void boxlite_options_set_rootfs_path(CBoxliteOptions* opts, const char* path) {
  if (!opts) return;
  try {
    opts->core.rootfs_path = path ? path : "";
  } catch (...) {
  }
}

void boxlite_options_set_workdir(CBoxliteOptions* opts, const char* workdir) {
  if (!opts) return;
  try {
    opts->core.working_dir = workdir ? workdir : "";
  } catch (...) {
  }
}

void boxlite_options_set_user(CBoxliteOptions* opts, const char* user) {
  if (!opts) return;
  try {
    opts->core.user = user ? user : "";
  } catch (...) {
  }
}

void boxlite_options_add_env(CBoxliteOptions* opts, const char* key, const char* value) {
  if (!opts) return;
  try {
    if (!key || !*key || !value) {
      opts->invalid.push_back("env: a variable needs a non-empty key and a non-NULL value");
      return;
    }
    opts->core.env.emplace_back(key, value);
  } catch (...) {
  }
}

void boxlite_options_set_entrypoint(CBoxliteOptions* opts, const char* const* args, int argc) {
  if (!opts) return;
  try {
    copy_args(opts, "entrypoint", args, argc, opts->core.entrypoint);
  } catch (...) {
  }
}

void boxlite_options_set_cmd(CBoxliteOptions* opts, const char* const* args, int argc) {
  if (!opts) return;
  try {
    copy_args(opts, "cmd", args, argc, opts->core.cmd);
  } catch (...) {
  }
}

void boxlite_options_set_auto_remove(CBoxliteOptions* opts, int auto_remove) {
  if (opts) opts->core.auto_remove = auto_remove != 0;
}

void boxlite_options_set_detach(CBoxliteOptions* opts, int detach) {
  if (opts) opts->core.detach = detach != 0;
}

BoxliteErrorCode boxlite_options_set_engine(CBoxliteOptions* opts, const char* engine, CBoxliteError* out_error) {
  return guard(out_error, [&] {
    require(opts, "opts");
    // NULL or "": the default ($BOXLITE_ENGINE, the home config's, or vm).
    opts->core.engine.reset();
    if (engine && *engine) opts->core.engine = parse_engine_kind(engine);
  });
}

void boxlite_options_set_advanced(CBoxliteOptions* opts, const CAdvancedBoxOptions* adv) {
  if (!opts || !adv) return;
  opts->security_disabled = !adv->security_enabled;
  opts->core.security = adv->security;
}

void boxlite_options_free(CBoxliteOptions* opts) { delete opts; }

BoxliteErrorCode boxlite_advanced_options_new(CAdvancedBoxOptions** out_opts, CBoxliteError* out_error) {
  return guard(out_error, [&] {
    require(out_opts, "out_opts");
    *out_opts = new CAdvancedBoxOptions;
  });
}

void boxlite_advanced_options_set_security_enabled(CAdvancedBoxOptions* opts, int enabled) {
  if (opts) opts->security_enabled = enabled != 0;
}

void boxlite_advanced_options_set_seccomp_enabled(CAdvancedBoxOptions* opts, int enabled) {
  if (opts) opts->security.seccomp = enabled != 0;
}

namespace {
void set_limit(CAdvancedBoxOptions* opts, std::optional<uint64_t> SecurityOptions::*field, uint64_t v) {
  if (opts) opts->security.*field = v ? std::optional<uint64_t>(v) : std::nullopt;
}
}  // namespace

void boxlite_advanced_options_set_max_open_files(CAdvancedBoxOptions* opts, uint64_t n) {
  set_limit(opts, &SecurityOptions::max_open_files, n);
}
void boxlite_advanced_options_set_max_file_size(CAdvancedBoxOptions* opts, uint64_t bytes) {
  set_limit(opts, &SecurityOptions::max_file_size, bytes);
}
void boxlite_advanced_options_set_max_processes(CAdvancedBoxOptions* opts, uint64_t n) {
  set_limit(opts, &SecurityOptions::max_processes, n);
}
void boxlite_advanced_options_set_max_memory(CAdvancedBoxOptions* opts, uint64_t bytes) {
  set_limit(opts, &SecurityOptions::max_memory, bytes);
}
void boxlite_advanced_options_set_max_cpu_time(CAdvancedBoxOptions* opts, uint64_t secs) {
  set_limit(opts, &SecurityOptions::max_cpu_time, secs);
}

void boxlite_advanced_options_free(CAdvancedBoxOptions* opts) { delete opts; }

}  // extern "C"

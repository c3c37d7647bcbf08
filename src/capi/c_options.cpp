// CBoxliteOptions and CAdvancedBoxOptions. The void setters cannot report, so a
// bad value is remembered and reported by boxlite_create_box; so is a documented
// option the core does not support yet: it is never silently dropped.
#include <cstring>
#include <string>
#include <vector>

#include "capi/errors.hpp"
#include "capi/options.hpp"

namespace boxlite::capi {

BoxOptions checked_options(const CBoxliteOptions& o, const char* fn) {
  if (!o.invalid.empty()) invalid(std::string(fn) + ": " + o.invalid.front());
  std::vector<std::string> unsupported = o.unsupported;
  if (o.security_disabled) {
    unsupported.push_back("disabling the security sandbox (boxlite_advanced_options_set_security_enabled(adv, 0))");
  }
  if (!unsupported.empty()) {
    std::string what;
    for (const auto& u : unsupported) what += (what.empty() ? "" : "; ") + u;
    throw Error(ErrorKind::Unsupported, std::string(fn) + ": not supported yet: " + what);
  }
  try {
    validate_box_options(o.core);
  } catch (const Error& e) {
    throw Error(e.kind(), std::string(fn) + ": " + e.what());
  }
  return o.core;
}

namespace {

// args[0..argc) as strings; a bad array is remembered as invalid.
bool copy_args(CBoxliteOptions* o, const char* fn, const char* const* args, int argc, std::vector<std::string>& out) {
  if (argc < 0 || (argc > 0 && !args)) {
    o->invalid.push_back(std::string(fn) + ": args is NULL or argc is negative");
    return false;
  }
  std::vector<std::string> v;
  for (int i = 0; i < argc; ++i) {
    if (!args[i]) {
      o->invalid.push_back(std::string(fn) + ": args[" + std::to_string(i) + "] is NULL");
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
    const char* fn = "boxlite_options_new";
    require(out_opts, fn, "out_opts");
    *out_opts = nullptr;
    require_str(image, fn, "image");
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
      opts->invalid.push_back("boxlite_options_add_bind_mount: host_path and guest_path must be non-empty");
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
    require(opts, "boxlite_options_add_port", "opts");
    if (guest_port == 0) invalid("boxlite_options_add_port: guest_port must be 1..65535");
    // A C caller may pass any int; reading it as the C++ enum would be undefined.
    unsigned raw = 0;
    static_assert(sizeof raw == sizeof protocol);
    std::memcpy(&raw, &protocol, sizeof raw);
    if (raw != BoxlitePortProtocolTcp && raw != BoxlitePortProtocolUdp) {
      invalid("boxlite_options_add_port: protocol must be BoxlitePortProtocolTcp or BoxlitePortProtocolUdp");
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
      opts->invalid.push_back("boxlite_options_add_secret: name must be non-empty and value non-NULL");
      return;
    }
    if (hosts_count < 0 || (hosts_count > 0 && !hosts)) {
      opts->invalid.push_back("boxlite_options_add_secret: hosts is NULL or hosts_count is negative");
      return;
    }
    Secret sec;
    sec.name = name;
    sec.value = value;
    sec.placeholder = placeholder ? placeholder : "";
    for (int i = 0; i < hosts_count; ++i) {
      if (!hosts[i] || !*hosts[i]) {
        opts->invalid.push_back("boxlite_options_add_secret: hosts[" + std::to_string(i) + "] is NULL or empty");
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
      opts->invalid.push_back("boxlite_options_add_allow_net: host must be non-empty");
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
      opts->invalid.push_back("boxlite_options_add_env: key must be non-empty and value non-NULL");
      return;
    }
    opts->core.env.emplace_back(key, value);
  } catch (...) {
  }
}

void boxlite_options_set_entrypoint(CBoxliteOptions* opts, const char* const* args, int argc) {
  if (!opts) return;
  try {
    copy_args(opts, "boxlite_options_set_entrypoint", args, argc, opts->core.entrypoint);
  } catch (...) {
  }
}

void boxlite_options_set_cmd(CBoxliteOptions* opts, const char* const* args, int argc) {
  if (!opts) return;
  try {
    copy_args(opts, "boxlite_options_set_cmd", args, argc, opts->core.cmd);
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
    require(opts, "boxlite_options_set_engine", "opts");
    // NULL or "": the default ($BOXLITE_ENGINE, the home config's, or vm).
    opts->core.engine.reset();
    if (engine && *engine) opts->core.engine = parse_engine_kind(engine, "boxlite_options_set_engine");
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
    require(out_opts, "boxlite_advanced_options_new", "out_opts");
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

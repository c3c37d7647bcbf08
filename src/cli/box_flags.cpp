// The box-shaping flags `run` and `create` share, and the BoxOptions they make.
#include <cstdio>

#include "commands.hpp"

namespace boxlite::cli {

void add_box_flags(CLI::App* c, BoxFlags& f) {
  c->add_option("image", f.image,
                "Image: a registry reference (alpine, host:port/repo:tag, name@sha256:...), an OCI layout directory, "
                "or oci:DIR[:TAG]")
      ->required();
  c->add_option("cmd", f.cmd, "Command and arguments (default: the image's entrypoint and cmd)");
  c->positionals_at_end();
  c->add_option("--name", f.name, "Box name (unique)");
  c->add_option("-e,--env", f.env, "Set KEY=VALUE (a bare KEY takes the host value; repeatable)")
      ->allow_extra_args(false);  // one value per -e: the image and command after it stay positional
  c->add_option("-w,--workdir", f.workdir, "Working directory inside the box");
  c->add_option("-u,--user", f.user, "user[:group], by name or number");
  c->add_option("--entrypoint", f.entrypoint, "Override the image entrypoint (one executable)");
  c->add_option("--engine", f.engine, "vm (default) or jail")->envname("BOXLITE_ENGINE");
  c->add_option("--kernel", f.kernel, "Guest kernel: a path, or 'debian' for Debian's prebuilt kernel");
  c->add_option("--cpus", f.cpus, "Virtual CPUs (default 1; over 255 is clamped)")->transform(whole_number<int>());
  c->add_option("--memory", f.memory, "Memory in MiB (default 1024)")->transform(whole_number<int>());
  c->add_option("-p,--publish", f.publish, "Publish a box port: [[host_ip:]host_port:]box_port[/tcp|udp] (repeatable)")
      ->allow_extra_args(false);  // one value per -p, so the image after it stays positional
  c->add_option("--network", f.network, "Network mode: enabled (default) or disabled (no interface but loopback)")
      ->check(CLI::IsMember({"enabled", "disabled"}));
  c->add_option("--allow-net", f.allow_net,
                "Allow egress only to this host (exact, or *.domain); repeatable; default: all egress")
      ->allow_extra_args(false);
  c->add_option("-v,--volume", f.volumes, "Share a host directory: HOST:GUEST[:ro|:rw] (repeatable; default rw)")
      ->allow_extra_args(false);
  c->add_option("--disk-size,--disk-size-gb", f.disk_size_gb,
                "Root disk size in GB (sparse; default 10; never below the image; vm engine)")
      ->transform(whole_number<int64_t>());
  c->add_option("--security", f.security,
                "enable (default): the seccomp filter on the box (jail) or on QEMU (vm); disable: without it")
      ->envname("BOXLITE_SECURITY")
      ->check(CLI::IsMember({"enable", "disable"}));
}

PortSpec parse_publish(const std::string& text) {
  PortSpec p;
  std::string spec = text;
  if (auto slash = spec.rfind('/'); slash != std::string::npos) {
    p.protocol = spec.substr(slash + 1);
    spec = spec.substr(0, slash);
  }
  auto number = [&](const std::string& s) {
    if (s.empty() || s.size() > 5 || s.find_first_not_of("0123456789") != std::string::npos) {
      throw Error(ErrorKind::InvalidArgument,
                  "invalid port '" + s + "' in -p " + text + ": expected [[host_ip:]host_port:]box_port[/tcp|udp]");
    }
    return std::stoi(s);
  };
  auto last = spec.rfind(':');
  if (last == std::string::npos) {
    p.guest_port = number(spec);
    return p;
  }
  p.guest_port = number(spec.substr(last + 1));
  std::string rest = spec.substr(0, last);
  auto ip_end = rest.rfind(':');
  if (ip_end != std::string::npos) {
    p.host_ip = rest.substr(0, ip_end);
    rest = rest.substr(ip_end + 1);
  }
  p.host_port = rest.empty() ? 0 : number(rest);
  return p;
}

BoxOptions box_options_from(const BoxFlags& f) {
  BoxOptions o;
  o.image = f.image;
  // Out-of-range values reach the runtime, which names the range; only the
  // documented clamp above 255 happens here.
  if (f.cpus && *f.cpus > 255) {
    std::fprintf(stderr, "boxlite: warning: --cpus %d is over the maximum of 255; using 255\n", *f.cpus);
    o.cpus = 255;
  } else {
    o.cpus = f.cpus;
  }
  o.memory_mib = f.memory;
  o.env = parse_env(f.env);
  o.working_dir = f.workdir;
  o.user = f.user;
  if (!f.entrypoint.empty()) o.entrypoint = {f.entrypoint};
  o.cmd = f.cmd;
  if (!f.engine.empty()) o.engine = parse_engine_kind(f.engine, "--engine");
  o.kernel = f.kernel;
  if (!f.network.empty()) o.network.mode = f.network;
  o.network.allow_net = f.allow_net;
  for (const auto& p : f.publish) o.ports.push_back(parse_publish(p));
  for (const auto& v : f.volumes) o.volumes.push_back(parse_volume_flag(v));
  if (f.disk_size_gb) {
    if (*f.disk_size_gb < 1) {
      throw Error(ErrorKind::InvalidArgument,
                  "--disk-size must be a positive number of GB, got " + std::to_string(*f.disk_size_gb));
    }
    o.disk_size_gb = static_cast<uint64_t>(*f.disk_size_gb);
  }
  o.security.seccomp = f.security != "disable";
  return o;
}

}  // namespace boxlite::cli

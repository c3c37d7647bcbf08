#include "core/network.hpp"

#include <cstdlib>

#include "common/error.hpp"
#include "common/io.hpp"
#include "core/paths.hpp"

namespace boxlite {

net::NetConfig make_net_config(const BoxOptions& opts) {
  net::NetConfig c;
  const auto& mode = opts.network.mode;
  if (mode != "enabled" && mode != "disabled") {
    throw Error(ErrorCode::InvalidArgument, "invalid network mode '" + mode + "': expected 'enabled' or 'disabled'");
  }
  c.enabled = mode == "enabled";
  c.allow_net = opts.network.allow_net;
  for (const auto& p : opts.ports) {
    if (p.guest_port < 1 || p.guest_port > 65535) {
      throw Error(ErrorCode::InvalidArgument, "guest_port must be between 1 and 65535, got " + std::to_string(p.guest_port));
    }
    if (p.host_port < 0 || p.host_port > 65535) {
      throw Error(ErrorCode::InvalidArgument, "host_port must be between 0 and 65535, got " + std::to_string(p.host_port));
    }
    if (p.protocol != "tcp" && p.protocol != "udp") {
      throw Error(ErrorCode::InvalidArgument, "invalid port protocol '" + p.protocol + "': expected 'tcp' or 'udp'");
    }
    net::PortForward f;
    f.guest_port = static_cast<uint16_t>(p.guest_port);
    f.host_port = static_cast<uint16_t>(p.host_port == 0 ? p.guest_port : p.host_port);
    f.udp = p.protocol == "udp";
    if (!p.host_ip.empty()) f.host_ip = p.host_ip;
    c.ports.push_back(f);
  }
  net::validate_config(c);
  const char* dns = std::getenv("BOXLITE_DNS_SERVER");
  if (dns && *dns) c.dns_upstream = dns;
  c.binary = core::libexec_dir() + "/boxlite-net";
  return c;
}

}  // namespace boxlite

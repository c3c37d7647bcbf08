// BoxOptions' network and ports, turned into what the box's network runs with,
// and the box's network counters.
#pragma once

#include <optional>
#include <string>

#include "boxlite/options.hpp"
#include "net/config.hpp"
#include "net/stats.hpp"

namespace boxlite {

// Validates opts.network and opts.ports (throws Error(InvalidArgument) naming the
// bad field) and resolves them: host_port 0 becomes the guest port, host_ip ""
// becomes 0.0.0.0. The upstream resolver is $BOXLITE_DNS_SERVER (ip[:port]) when
// set, else the host's (docs/networking.md).
// Secrets become SecretRules (default placeholder "<BOXLITE_SECRET:name>"); the CA
// paths are filled by the runtime (ensure_home_ca).
net::NetConfig make_net_config(const BoxOptions& opts);

// BOXLITE_SECRET_<NAME>: uppercased, non-alphanumerics become '_' (documented).
std::string secret_env_name(const std::string& secret_name);
// The environment entries (K=V) a box with these secrets gets: placeholders only.
std::vector<std::string> secret_env(const net::NetConfig& c);

struct HomeCa {
  std::string cert, key;  // PEM files
};
// The home's TLS interception CA (<home>/ca/{ca.pem,ca.key}), made once (EC P-256,
// 10 years) and reused by every box of the home.
HomeCa ensure_home_ca(const std::string& home);

// Bytes sent/received, TCP connections and errors of a box's network since it
// last started (net/stats.hpp); nullopt when it has none (disabled, never started).
// For BoxMetrics: network_bytes_sent, network_bytes_received, network_tcp_connections,
// network_tcp_errors.
inline std::optional<net::NetMetrics> box_network_metrics(const std::string& box_dir) {
  return net::read_net_metrics(box_dir);
}

}  // namespace boxlite

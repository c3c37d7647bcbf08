// BoxOptions' network and ports, turned into what the box's network runs with,
// and the box's network counters.
#pragma once

#include <optional>
#include <string>

#include "core/options.hpp"
#include "net/config.hpp"
#include "net/stats.hpp"

namespace boxlite {

// Validates opts.network and opts.ports (throws Error(InvalidArgument) naming the
// bad field) and resolves them: host_port 0 becomes the guest port, host_ip ""
// becomes 0.0.0.0. The upstream resolver is $BOXLITE_DNS_SERVER (ip[:port]) when
// set, else the host's (docs/networking.md).
net::NetConfig make_net_config(const BoxOptions& opts);

// Bytes sent/received, TCP connections and errors of a box's network since it
// last started (net/stats.hpp); nullopt when it has none (disabled, never started).
// For BoxMetrics: network_bytes_sent, network_bytes_received, network_tcp_connections,
// network_tcp_errors.
inline std::optional<net::NetMetrics> box_network_metrics(const std::string& box_dir) {
  return net::read_net_metrics(box_dir);
}

}  // namespace boxlite

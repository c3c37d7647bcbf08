// The network of one box as the shim and boxlite-net see it: the documented
// NetworkSpec (mode, allow_net), the port forwards, and where DNS goes upstream.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace boxlite::net {

// The documented guest addressing (gvproxy's): 192.168.127.0/24, gateway and DNS
// at .1, the guest at .2, the host's loopback at .254 (host.boxlite.internal).
inline constexpr const char* kGuestAddress = "192.168.127.2";
inline constexpr const char* kGatewayAddress = "192.168.127.1";
inline constexpr const char* kHostAlias = "192.168.127.254";
inline constexpr const char* kHostAliasName = "host.boxlite.internal";
inline constexpr int kPrefixLength = 24;
inline constexpr const char* kGuestInterface = "eth0";

struct PortForward {
  std::string host_ip = "0.0.0.0";  // the documented default binds every host address
  uint16_t host_port = 0;           // resolved: never 0 here
  uint16_t guest_port = 0;
  bool udp = false;
};

// A secret as the host proxy holds it: the real value never leaves the host.
struct SecretRule {
  std::string name;
  std::string placeholder;
  std::string value;
  std::vector<std::string> hosts;  // exact or "*.x"; empty: any host
};

struct NetConfig {
  bool enabled = true;                 // NetworkSpec.mode == "enabled"
  std::vector<std::string> allow_net;  // empty: all egress
  std::vector<PortForward> ports;
  // "ip:port" of the resolver queries are forwarded to; "" = the host's first
  // nameserver in /etc/resolv.conf.
  std::string dns_upstream;
  std::string binary;  // boxlite-net
  // Secrets: with any, HTTPS (TCP 443) from the box goes through the TLS proxy in
  // boxlite-net, which signs per-host certificates with the home's CA.
  std::vector<SecretRule> secrets;
  std::string ca_cert, ca_key;  // PEM files of the home's CA
  std::string upstream_ca;      // extra CA bundle trusted for upstream TLS ("" = system only)
};

// JSON for shim.json's "net" object (nlohmann-free header for callers).
std::string config_to_json(const NetConfig& c);
NetConfig config_from_json(const std::string& text);

// Throws Error(InvalidArgument) naming the bad entry: allow_net names (exact or
// "*.domain"), ports (1..65535, an IPv4 host_ip, no duplicate host binding).
void validate_config(const NetConfig& c);

// Canonical form of an allow_net entry (lowercase, no trailing dot).
std::string normalize_host(const std::string& name);

}  // namespace boxlite::net

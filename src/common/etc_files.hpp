// The /etc files of a box with a network: /etc/hosts and /etc/resolv.conf. A VM's
// agent writes them into the box's root; a jail's shim writes them into the box's
// directory and binds them onto the root's (engine/jail, as Docker does).
#pragma once

#include <string>

namespace boxlite {

inline std::string hosts_file_text(const std::string& address, const std::string& hostname,
                                   const std::string& alias_address, const std::string& alias_name) {
  std::string hosts = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n";
  if (!hostname.empty()) hosts += address + "\t" + hostname + "\n";
  return hosts + alias_address + "\t" + alias_name + "\n";
}

inline std::string resolv_conf_text(const std::string& dns) { return "nameserver " + dns + "\n"; }

}  // namespace boxlite

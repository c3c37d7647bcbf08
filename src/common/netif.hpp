// Static IPv4 configuration of a network interface with the classic ioctls
// (address, netmask, up, default route): what the guest agent needs in a VM and
// the shim needs for a jail's TAP, in images and hosts that have no `ip` tool.
#pragma once

#include <string>

namespace boxlite {

// Sets the interface up (IFF_UP | IFF_RUNNING) in the calling process's network
// namespace. 0 or an errno; neither allocates nor throws (a jail's init, between
// its clone and the agent, reports errors itself).
int bring_interface_up(const char* ifname) noexcept;

// Must run in the interface's network namespace. Throws Error(Network) naming the step.
void configure_ipv4_interface(const std::string& ifname, const std::string& address, int prefix_len,
                              const std::string& gateway);

}  // namespace boxlite

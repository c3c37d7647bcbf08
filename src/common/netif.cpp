#include "common/netif.hpp"

#include <arpa/inet.h>
#include <net/if.h>
#include <net/route.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "common/error.hpp"
#include "common/fd.hpp"

namespace boxlite {
namespace {

sockaddr_in make_addr(const std::string& dotted) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  if (::inet_pton(AF_INET, dotted.c_str(), &sa.sin_addr) != 1) {
    throw Error(ErrorKind::InvalidArgument, "invalid IPv4 address '" + dotted + "'");
  }
  return sa;
}

void set_sockaddr(sockaddr& dst, const sockaddr_in& src) { std::memcpy(&dst, &src, sizeof src); }

}  // namespace

int bring_interface_up(const char* ifname) noexcept {
  UniqueFd s(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!s) return errno;
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, ifname, IFNAMSIZ - 1);
  if (::ioctl(s.get(), SIOCGIFFLAGS, &ifr) != 0) return errno;
  ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP | IFF_RUNNING);
  return ::ioctl(s.get(), SIOCSIFFLAGS, &ifr) == 0 ? 0 : errno;
}

void configure_ipv4_interface(const std::string& ifname, const std::string& address, int prefix_len,
                              const std::string& gateway) {
  if (ifname.empty() || ifname.size() >= IFNAMSIZ)
    throw Error(ErrorKind::InvalidArgument, "invalid interface name '" + ifname + "'");
  if (prefix_len < 0 || prefix_len > 32)
    throw Error(ErrorKind::InvalidArgument, "invalid prefix length " + std::to_string(prefix_len));
  UniqueFd s(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!s) throw_errno(ErrorKind::Network, "socket to configure " + ifname);
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, ifname.c_str(), IFNAMSIZ - 1);

  set_sockaddr(ifr.ifr_addr, make_addr(address));
  if (::ioctl(s.get(), SIOCSIFADDR, &ifr) != 0)
    throw_errno(ErrorKind::Network, "set address " + address + " on " + ifname);
  sockaddr_in mask{};
  mask.sin_family = AF_INET;
  mask.sin_addr.s_addr = htonl(prefix_len == 0 ? 0 : ~uint32_t{0} << (32 - prefix_len));
  set_sockaddr(ifr.ifr_netmask, mask);
  if (::ioctl(s.get(), SIOCSIFNETMASK, &ifr) != 0) throw_errno(ErrorKind::Network, "set netmask on " + ifname);

  if (int err = bring_interface_up(ifname.c_str()); err != 0)
    throw_errno(ErrorKind::Network, "bring up " + ifname, err);

  if (gateway.empty()) return;
  rtentry rt{};
  sockaddr_in any{};
  any.sin_family = AF_INET;
  set_sockaddr(rt.rt_dst, any);
  set_sockaddr(rt.rt_genmask, any);
  set_sockaddr(rt.rt_gateway, make_addr(gateway));
  rt.rt_flags = RTF_UP | RTF_GATEWAY;
  std::string dev = ifname;
  rt.rt_dev = dev.data();
  if (::ioctl(s.get(), SIOCADDRT, &rt) != 0 && errno != EEXIST) {
    throw_errno(ErrorKind::Network, "add default route via " + gateway + " on " + ifname);
  }
}

}  // namespace boxlite

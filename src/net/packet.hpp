// Ethernet/IPv4/UDP/TCP parsing and the few frames the filter builds itself
// (DNS replies, TCP resets). Every length is checked: frames come from the guest.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace boxlite::net {

inline constexpr size_t kEthHeader = 14;
// The largest Ethernet frame either end of the link sends (the MTU is 1500).
inline constexpr size_t kMaxFrame = 65536;
inline constexpr uint16_t kEtherIpv4 = 0x0800, kEtherArp = 0x0806, kEtherIpv6 = 0x86dd;
inline constexpr uint8_t kProtoIcmp = 1, kProtoTcp = 6, kProtoUdp = 17;
inline constexpr uint8_t kTcpFin = 0x01, kTcpSyn = 0x02, kTcpRst = 0x04, kTcpAck = 0x10;

uint16_t ether_type(std::string_view frame);

// QEMU's -netdev stream framing (LinkKind::Stream): each frame after its 4-byte
// big-endian length. Calls `frame` for every whole frame at the start of `buf` and
// returns the bytes they took (a partial frame waits for more); nullopt when a
// length is over kMaxFrame, which no guest sends: the link is then closed.
std::optional<size_t> split_stream_frames(std::string_view buf, const std::function<void(std::string_view)>& frame);

// An IPv4 packet in an Ethernet frame. Addresses are in host byte order.
struct Ipv4View {
  uint32_t src = 0, dst = 0;
  uint8_t proto = 0;
  size_t ip_offset = kEthHeader, ip_header = 0, ip_total = 0;
  bool fragment = false;          // a non-first fragment carries no ports
  uint16_t sport = 0, dport = 0;  // TCP/UDP
  uint8_t tcp_flags = 0;
  uint32_t tcp_seq = 0;
  size_t payload_offset = 0, payload_size = 0;  // UDP/TCP payload in the frame
};

// nullopt: not IPv4, or malformed (truncated, bad header length).
std::optional<Ipv4View> parse_ipv4(std::string_view frame);

uint32_t ipv4_from_string(const char* dotted);  // host order; 0 on error
std::string ipv4_to_string(uint32_t addr);

// RFC 1071 one's-complement sum, folded and inverted.
uint16_t inet_checksum(const uint8_t* data, size_t len, uint32_t sum = 0);

// A UDP reply to `request` (addresses, ports and MACs swapped) carrying payload.
std::string build_udp_reply(std::string_view request, const Ipv4View& req, std::string_view payload);
// A TCP RST|ACK answering a SYN, so a refused connection fails at once.
std::string build_tcp_reset(std::string_view request, const Ipv4View& req);

// Rewrites the TCP source (dst=false) or destination of an IPv4 TCP frame in place
// and recomputes both checksums (the redirection of intercepted HTTPS).
void set_tcp_endpoint(std::string& frame, const Ipv4View& v, bool dst, uint32_t addr, uint16_t port);

}  // namespace boxlite::net

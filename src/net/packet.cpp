#include "net/packet.hpp"

#include <arpa/inet.h>

#include <cstring>

namespace boxlite::net {
namespace {

uint16_t rd16(std::string_view b, size_t off) {
  return static_cast<uint16_t>((static_cast<uint8_t>(b[off]) << 8) | static_cast<uint8_t>(b[off + 1]));
}
uint32_t rd32(std::string_view b, size_t off) { return (uint32_t{rd16(b, off)} << 16) | rd16(b, off + 2); }
void wr16(std::string& b, size_t off, uint16_t v) {
  b[off] = static_cast<char>(v >> 8);
  b[off + 1] = static_cast<char>(v & 0xff);
}
void wr32(std::string& b, size_t off, uint32_t v) {
  wr16(b, off, static_cast<uint16_t>(v >> 16));
  wr16(b, off + 2, static_cast<uint16_t>(v & 0xffff));
}

// Ethernet (MACs swapped) + an IPv4 header from `req` with addresses swapped.
std::string reply_headers(std::string_view request, const Ipv4View& req, uint8_t proto, size_t l4_size) {
  std::string f(kEthHeader + 20 + l4_size, '\0');
  std::memcpy(f.data(), request.data() + 6, 6);  // to the sender
  std::memcpy(f.data() + 6, request.data(), 6);  // from whom it was sent to
  wr16(f, 12, kEtherIpv4);
  size_t ip = kEthHeader;
  f[ip] = 0x45;
  wr16(f, ip + 2, static_cast<uint16_t>(20 + l4_size));
  wr16(f, ip + 6, 0x4000);  // don't fragment
  f[ip + 8] = 64;
  f[ip + 9] = static_cast<char>(proto);
  wr32(f, ip + 12, req.dst);
  wr32(f, ip + 16, req.src);
  wr16(f, ip + 10, inet_checksum(reinterpret_cast<const uint8_t*>(f.data() + ip), 20));
  return f;
}

uint32_t pseudo_header_sum(uint32_t src, uint32_t dst, uint8_t proto, size_t len) {
  return (src >> 16) + (src & 0xffff) + (dst >> 16) + (dst & 0xffff) + proto + static_cast<uint32_t>(len);
}

}  // namespace

std::optional<size_t> split_stream_frames(std::string_view buf, const std::function<void(std::string_view)>& frame) {
  size_t off = 0;
  while (buf.size() - off >= 4) {
    size_t len = rd32(buf, off);
    if (len > kMaxFrame) return std::nullopt;
    if (buf.size() - off - 4 < len) break;
    frame(buf.substr(off + 4, len));
    off += 4 + len;
  }
  return off;
}

uint16_t ether_type(std::string_view frame) { return frame.size() < kEthHeader ? 0 : rd16(frame, 12); }

std::optional<Ipv4View> parse_ipv4(std::string_view frame) {
  if (ether_type(frame) != kEtherIpv4 || frame.size() < kEthHeader + 20) return std::nullopt;
  Ipv4View v;
  auto b0 = static_cast<uint8_t>(frame[kEthHeader]);
  if ((b0 >> 4) != 4) return std::nullopt;
  v.ip_header = size_t{b0 & 0x0fu} * 4;
  v.ip_total = rd16(frame, kEthHeader + 2);
  if (v.ip_header < 20 || v.ip_total < v.ip_header || kEthHeader + v.ip_total > frame.size()) return std::nullopt;
  v.proto = static_cast<uint8_t>(frame[kEthHeader + 9]);
  v.src = rd32(frame, kEthHeader + 12);
  v.dst = rd32(frame, kEthHeader + 16);
  v.fragment = (rd16(frame, kEthHeader + 6) & 0x1fff) != 0;
  size_t l4 = kEthHeader + v.ip_header, end = kEthHeader + v.ip_total;
  if (v.fragment) return v;
  if (v.proto == kProtoUdp) {
    if (end - l4 < 8) return std::nullopt;
    v.sport = rd16(frame, l4);
    v.dport = rd16(frame, l4 + 2);
    size_t ulen = rd16(frame, l4 + 4);
    if (ulen < 8 || l4 + ulen > end) return std::nullopt;
    v.payload_offset = l4 + 8;
    v.payload_size = ulen - 8;
  } else if (v.proto == kProtoTcp) {
    if (end - l4 < 20) return std::nullopt;
    v.sport = rd16(frame, l4);
    v.dport = rd16(frame, l4 + 2);
    v.tcp_seq = rd32(frame, l4 + 4);
    size_t doff = static_cast<size_t>(static_cast<uint8_t>(frame[l4 + 12]) >> 4) * 4;
    if (doff < 20 || l4 + doff > end) return std::nullopt;
    v.tcp_flags = static_cast<uint8_t>(frame[l4 + 13]);
    v.payload_offset = l4 + doff;
    v.payload_size = end - l4 - doff;
  }
  return v;
}

uint32_t ipv4_from_string(const char* dotted) {
  in_addr a{};
  if (::inet_pton(AF_INET, dotted, &a) != 1) return 0;
  return ntohl(a.s_addr);
}

std::string ipv4_to_string(uint32_t addr) {
  in_addr a{htonl(addr)};
  char buf[INET_ADDRSTRLEN];
  return ::inet_ntop(AF_INET, &a, buf, sizeof buf) ? buf : "";
}

uint16_t inet_checksum(const uint8_t* data, size_t len, uint32_t sum) {
  for (size_t i = 0; i + 1 < len; i += 2) sum += static_cast<uint32_t>((data[i] << 8) | data[i + 1]);
  if (len & 1) sum += static_cast<uint32_t>(data[len - 1] << 8);
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint16_t>(~sum);
}

std::string build_udp_reply(std::string_view request, const Ipv4View& req, std::string_view payload) {
  std::string f = reply_headers(request, req, kProtoUdp, 8 + payload.size());
  size_t l4 = kEthHeader + 20;
  wr16(f, l4, req.dport);
  wr16(f, l4 + 2, req.sport);
  wr16(f, l4 + 4, static_cast<uint16_t>(8 + payload.size()));
  std::memcpy(f.data() + l4 + 8, payload.data(), payload.size());
  uint16_t sum = inet_checksum(reinterpret_cast<const uint8_t*>(f.data() + l4), 8 + payload.size(),
                               pseudo_header_sum(req.dst, req.src, kProtoUdp, 8 + payload.size()));
  wr16(f, l4 + 6, sum == 0 ? 0xffff : sum);
  return f;
}

std::string build_tcp_reset(std::string_view request, const Ipv4View& req) {
  std::string f = reply_headers(request, req, kProtoTcp, 20);
  size_t l4 = kEthHeader + 20;
  wr16(f, l4, req.dport);
  wr16(f, l4 + 2, req.sport);
  wr32(f, l4 + 4, 0);
  uint32_t ack = req.tcp_seq + static_cast<uint32_t>(req.payload_size) + ((req.tcp_flags & kTcpSyn) ? 1 : 0) +
                 ((req.tcp_flags & kTcpFin) ? 1 : 0);
  wr32(f, l4 + 8, ack);
  f[l4 + 12] = 0x50;
  f[l4 + 13] = static_cast<char>(kTcpRst | kTcpAck);
  wr16(f, l4 + 16,
       inet_checksum(reinterpret_cast<const uint8_t*>(f.data() + l4), 20,
                     pseudo_header_sum(req.dst, req.src, kProtoTcp, 20)));
  return f;
}

void set_tcp_endpoint(std::string& f, const Ipv4View& v, bool dst, uint32_t addr, uint16_t port) {
  size_t ip = kEthHeader, l4 = kEthHeader + v.ip_header, seg = v.ip_total - v.ip_header;
  wr32(f, ip + (dst ? 16 : 12), addr);
  wr16(f, l4 + (dst ? 2 : 0), port);
  wr16(f, ip + 10, 0);
  wr16(f, ip + 10, inet_checksum(reinterpret_cast<const uint8_t*>(f.data() + ip), v.ip_header));
  uint32_t src = dst ? v.src : addr, dst_addr = dst ? addr : v.dst;
  wr16(f, l4 + 16, 0);
  wr16(f, l4 + 16,
       inet_checksum(reinterpret_cast<const uint8_t*>(f.data() + l4), seg,
                     pseudo_header_sum(src, dst_addr, kProtoTcp, seg)));
}

}  // namespace boxlite::net

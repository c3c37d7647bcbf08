#include "net/dns.hpp"

#include <cctype>

namespace boxlite::net {
namespace {

constexpr size_t kHeader = 12;

uint16_t rd16(std::string_view b, size_t off) {
  return static_cast<uint16_t>((static_cast<uint8_t>(b[off]) << 8) | static_cast<uint8_t>(b[off + 1]));
}
void put16(std::string& b, uint16_t v) {
  b += static_cast<char>(v >> 8);
  b += static_cast<char>(v & 0xff);
}

// Skips a (possibly compressed) name at `off`; returns the offset after it, or 0.
size_t skip_name(std::string_view m, size_t off) {
  for (int labels = 0; labels < 128; ++labels) {
    if (off >= m.size()) return 0;
    auto len = static_cast<uint8_t>(m[off]);
    if (len == 0) return off + 1;
    if ((len & 0xc0) == 0xc0) return off + 2 <= m.size() ? off + 2 : 0;
    if (len & 0xc0) return 0;
    off += 1 + len;
  }
  return 0;
}

}  // namespace

std::optional<DnsQuestion> parse_dns_query(std::string_view m) {
  if (m.size() < kHeader) return std::nullopt;
  uint16_t flags = rd16(m, 2);
  if ((flags & 0x8000) || ((flags >> 11) & 0xf) != 0) return std::nullopt;
  if (rd16(m, 4) != 1) return std::nullopt;
  DnsQuestion q;
  q.id = rd16(m, 0);
  size_t off = kHeader;
  for (;;) {
    if (off >= m.size()) return std::nullopt;
    auto len = static_cast<uint8_t>(m[off++]);
    if (len == 0) break;
    if (len > 63 || off + len > m.size()) return std::nullopt;  // no compression in a question we accept
    if (!q.name.empty()) q.name += '.';
    for (size_t i = 0; i < len; ++i) q.name += static_cast<char>(std::tolower(static_cast<unsigned char>(m[off + i])));
    off += len;
    if (q.name.size() > 253) return std::nullopt;
  }
  if (off + 4 > m.size()) return std::nullopt;
  q.qtype = rd16(m, off);
  q.qclass = rd16(m, off + 2);
  q.end = off + 4;
  return q;
}

std::string build_dns_answer(std::string_view query, const DnsQuestion& q, std::optional<uint32_t> address) {
  bool with_record = address && q.qtype == kDnsTypeA && q.qclass == kDnsClassIn;
  std::string r;
  put16(r, q.id);
  uint16_t rd = rd16(query, 2) & 0x0100;
  put16(r, static_cast<uint16_t>(0x8480 | rd));  // QR, AA, RA (+RD echoed), NOERROR
  put16(r, 1);
  put16(r, with_record ? 1 : 0);
  put16(r, 0);
  put16(r, 0);
  r.append(query.substr(kHeader, q.end - kHeader));
  if (with_record) {
    put16(r, 0xc00c);  // the name of the question
    put16(r, kDnsTypeA);
    put16(r, kDnsClassIn);
    put16(r, 0);
    put16(r, 60);  // TTL: short, so a policy change is seen soon
    put16(r, 4);
    put16(r, static_cast<uint16_t>(*address >> 16));
    put16(r, static_cast<uint16_t>(*address & 0xffff));
  }
  return r;
}

std::string build_truncated_dns_reply(std::string_view query, const DnsQuestion& q, std::string_view reply) {
  constexpr uint16_t kTc = 0x0200;
  std::string r;
  put16(r, q.id);
  put16(r, static_cast<uint16_t>((reply.size() >= kHeader ? rd16(reply, 2) : 0x8180) | kTc | 0x8000));
  put16(r, 1);
  put16(r, 0);
  put16(r, 0);
  put16(r, 0);
  r.append(query.substr(kHeader, q.end - kHeader));
  return r;
}

std::vector<uint32_t> dns_answer_addresses(std::string_view m) {
  std::vector<uint32_t> out;
  if (m.size() < kHeader) return out;
  size_t qd = rd16(m, 4), an = rd16(m, 6), off = kHeader;
  for (size_t i = 0; i < qd; ++i) {
    off = skip_name(m, off);
    if (off == 0 || off + 4 > m.size()) return {};
    off += 4;
  }
  for (size_t i = 0; i < an; ++i) {
    off = skip_name(m, off);
    if (off == 0 || off + 10 > m.size()) return out;
    uint16_t type = rd16(m, off), cls = rd16(m, off + 2), rdlen = rd16(m, off + 8);
    off += 10;
    if (off + rdlen > m.size()) return out;
    if (type == kDnsTypeA && cls == kDnsClassIn && rdlen == 4) {
      out.push_back((uint32_t{rd16(m, off)} << 16) | rd16(m, off + 2));
    }
    off += rdlen;
  }
  return out;
}

}  // namespace boxlite::net

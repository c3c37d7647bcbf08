// Guest packets as boxlite-net sees them (netd.cpp's from_guest): the input as
// one Ethernet frame (a TAP read) and as QEMU's stream link (split_stream_frames),
// each frame from the box parsed (packet.hpp), judged by the egress policy with full
// egress and with an allowlist (policy.hpp), and answered the way the network
// process answers: a DNS query to the resolver parsed and answered (dns.hpp), a
// refused SYN reset, intercepted HTTPS redirected. The same bytes are also taken
// as a DNS message by themselves (a query, and an upstream's answer).
// Checks: every view stays inside the frame; what we build parses back as we
// built it, with valid checksums; the policy never passes a spoofed source.
#include <cstdint>
#include <cstring>
#include <string>

#include "fuzz/fuzz_support.hpp"
#include "net/dns.hpp"
#include "net/packet.hpp"
#include "net/policy.hpp"

namespace {

using namespace boxlite;
using namespace boxlite::net;

const EgressPolicy& open_policy() {
  static const EgressPolicy* p = new EgressPolicy(NetConfig{});
  return *p;
}

EgressPolicy& filtered_policy() {
  static EgressPolicy* p = [] {
    NetConfig c;
    c.allow_net = {"example.com", "*.allowed.test", kHostAliasName};
    auto* policy = new EgressPolicy(c);
    policy->learn(ipv4_from_string("93.184.216.34"));
    return policy;
  }();
  return *p;
}

void check_view(std::string_view frame, const Ipv4View& v) {
  fuzz::check(v.ip_header >= 20 && v.ip_total >= v.ip_header && kEthHeader + v.ip_total <= frame.size(),
              "IPv4 view outside the frame");
  if (v.payload_offset != 0)
    fuzz::check(v.payload_offset + v.payload_size <= kEthHeader + v.ip_total, "payload outside the packet");
}

// The IPv4 header's checksum, and the UDP/TCP one over the pseudo header, verify.
void check_checksums(std::string_view frame, const Ipv4View& v) {
  auto* b = reinterpret_cast<const uint8_t*>(frame.data());
  fuzz::check(inet_checksum(b + kEthHeader, v.ip_header) == 0, "bad IPv4 header checksum in a frame we built");
  size_t l4 = v.ip_total - v.ip_header;
  uint32_t pseudo =
      (v.src >> 16) + (v.src & 0xffff) + (v.dst >> 16) + (v.dst & 0xffff) + v.proto + static_cast<uint32_t>(l4);
  fuzz::check(inet_checksum(b + kEthHeader + v.ip_header, l4, pseudo) == 0, "bad L4 checksum in a frame we built");
}

// A frame we built for the guest: parses, replies to `req`, and checks out.
Ipv4View check_reply(const std::string& reply, const Ipv4View& req, uint8_t proto) {
  auto v = parse_ipv4(reply);
  fuzz::check(v.has_value(), "a reply we built does not parse");
  check_view(reply, *v);
  fuzz::check(
      v->proto == proto && v->src == req.dst && v->dst == req.src && v->sport == req.dport && v->dport == req.sport,
      "a reply does not answer its request");
  check_checksums(reply, *v);
  return *v;
}

void check_dns_answer(std::string_view query, const DnsQuestion& q, const std::string& answer) {
  auto again = parse_dns_query(query.substr(0, q.end));
  fuzz::check(again && again->name == q.name && again->end == q.end, "a question does not parse the same twice");
  fuzz::check(answer.size() >= q.end, "a DNS answer shorter than its question");
  fuzz::check(answer.compare(12, q.end - 12, query.substr(12, q.end - 12)) == 0, "an answer lost its question");
}

// The resolver at .1: the query parsed and answered (sinkhole, the host alias, or
// what an upstream said, cut to TC when too large).
void answer_dns(std::string_view frame, const Ipv4View& ip, const EgressPolicy& policy) {
  std::string_view msg = frame.substr(ip.payload_offset, ip.payload_size);
  auto q = parse_dns_query(msg);
  if (!q) return;
  fuzz::check(q->end <= msg.size() && q->name.size() <= 253, "a DNS question outside its message");
  bool allowed = policy.name_allowed(q->name);
  std::optional<uint32_t> addr;
  if (!allowed) addr = 0;
  if (q->name == kHostAliasName) addr = policy.host_allowed() ? ipv4_from_string(kHostAlias) : 0;
  std::string answer = build_dns_answer(msg, *q, addr);
  check_dns_answer(msg, *q, answer);
  Ipv4View r = check_reply(build_udp_reply(frame, ip, answer), ip, kProtoUdp);
  fuzz::check(r.payload_size == answer.size(), "a DNS reply lost bytes");
  std::string cut = build_truncated_dns_reply(msg, *q, msg);
  check_dns_answer(msg, *q, cut);
}

void judge(std::string_view frame, const Ipv4View& ip, const EgressPolicy& policy) {
  Verdict v = policy.classify(ip);
  if (v != Verdict::Refuse) fuzz::check(ip.src == ipv4_from_string(kGuestAddress), "a spoofed source passed");
  if (v == Verdict::Resolver) {
    fuzz::check(ip.proto == kProtoUdp && ip.dport == 53 && !ip.fragment, "the resolver got a non-DNS packet");
    answer_dns(frame, ip, policy);
  }
  bool syn = ip.proto == kProtoTcp && (ip.tcp_flags & kTcpSyn) && !(ip.tcp_flags & kTcpAck);
  if (v == Verdict::Refuse && syn) check_reply(build_tcp_reset(frame, ip), ip, kProtoTcp);
  if (v == Verdict::Pass && ip.proto == kProtoTcp && !ip.fragment && ip.dport == 443) {
    // The secrets proxy's redirection, and its way back.
    std::string redirected(frame);
    set_tcp_endpoint(redirected, ip, true, ipv4_from_string(kHostAlias), 40000);
    auto r = parse_ipv4(redirected);
    fuzz::check(r && r->dst == ipv4_from_string(kHostAlias) && r->dport == 40000 && r->sport == ip.sport,
                "a redirected frame does not go to the proxy");
    check_checksums(redirected, *r);
    set_tcp_endpoint(redirected, *r, false, ip.dst, ip.dport);
    auto back = parse_ipv4(redirected);
    fuzz::check(back && back->src == ip.dst && back->sport == ip.dport, "a restored frame lost its origin");
  }
}

void one_frame(std::string_view frame) {
  (void)ether_type(frame);
  if (auto ip = parse_ipv4(frame)) {
    check_view(frame, *ip);
    judge(frame, *ip, open_policy());
    judge(frame, *ip, filtered_policy());
  }
  // The bytes as a DNS message alone: a query the resolver reads, an answer it learns from.
  if (auto q = parse_dns_query(frame)) {
    check_dns_answer(frame, *q, build_dns_answer(frame, *q, ipv4_from_string("10.0.0.1")));
    check_dns_answer(frame, *q, build_truncated_dns_reply(frame, *q, frame));
  }
  (void)dns_answer_addresses(frame);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes = fuzz::as_text(data, size);
  one_frame(bytes);  // as a TAP read (the jail's link) delivers a frame
  // As QEMU's stream link delivers frames: each after its length.
  size_t frames = 0;
  auto used = split_stream_frames(bytes, [&](std::string_view f) {
    ++frames;
    fuzz::check(f.size() <= kMaxFrame, "a stream frame over the limit");
    one_frame(f);
  });
  if (used) fuzz::check(*used <= bytes.size() && bytes.size() - *used < 4 + kMaxFrame, "a stream split wrongly");
  return 0;
}

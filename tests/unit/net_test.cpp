// The box network's pure logic (src/net): allowlist matching, the egress verdicts,
// DNS parsing and answers, packet parsing and the frames the filter builds.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include <string>

#include "common/error.hpp"
#include "net/config.hpp"
#include "net/dns.hpp"
#include "net/packet.hpp"
#include "net/policy.hpp"
#include "net/secrets.hpp"

namespace boxlite::net {
namespace {

// A DNS query for `name` (type A, RD set) with id 0x1234.
std::string dns_query(const std::string& name, uint16_t qtype = kDnsTypeA) {
  std::string m = {0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0};
  size_t start = 0;
  while (start <= name.size()) {
    size_t dot = name.find('.', start);
    if (dot == std::string::npos) dot = name.size();
    m += static_cast<char>(dot - start);
    m += name.substr(start, dot - start);
    start = dot + 1;
  }
  m += '\0';
  m += static_cast<char>(qtype >> 8);
  m += static_cast<char>(qtype & 0xff);
  m += std::string("\0\1", 2);
  return m;
}

// An Ethernet+IPv4+UDP/TCP frame from src:sport to dst:dport.
std::string frame(const char* src, uint16_t sport, const char* dst, uint16_t dport, uint8_t proto,
                  const std::string& payload = "", uint8_t tcp_flags = kTcpSyn) {
  size_t l4 = proto == kProtoTcp ? 20 : 8;
  std::string f(kEthHeader + 20 + l4, '\0');
  f += payload;
  std::string mac_dst("\x52\x55\x00\x00\x00\x01", 6), mac_src("\x52\x54\x00\x12\x34\x56", 6);
  f.replace(0, 6, mac_dst);
  f.replace(6, 6, mac_src);
  f[12] = 0x08;
  f[13] = 0x00;
  f[14] = 0x45;
  size_t total = 20 + l4 + payload.size();
  f[16] = static_cast<char>(total >> 8);
  f[17] = static_cast<char>(total & 0xff);
  f[22] = 64;
  f[23] = static_cast<char>(proto);
  uint32_t s = ipv4_from_string(src), d = ipv4_from_string(dst);
  for (int i = 0; i < 4; ++i) {
    f[26 + i] = static_cast<char>(s >> (24 - 8 * i));
    f[30 + i] = static_cast<char>(d >> (24 - 8 * i));
  }
  size_t o = kEthHeader + 20;
  f[o] = static_cast<char>(sport >> 8);
  f[o + 1] = static_cast<char>(sport & 0xff);
  f[o + 2] = static_cast<char>(dport >> 8);
  f[o + 3] = static_cast<char>(dport & 0xff);
  if (proto == kProtoUdp) {
    f[o + 4] = static_cast<char>((8 + payload.size()) >> 8);
    f[o + 5] = static_cast<char>((8 + payload.size()) & 0xff);
  } else {
    f[o + 7] = 100;  // seq 100
    f[o + 12] = 0x50;
    f[o + 13] = static_cast<char>(tcp_flags);
  }
  return f;
}

NetConfig allowing(std::vector<std::string> names) {
  NetConfig c;
  c.allow_net = std::move(names);
  return c;
}

TEST(NetAllowlist, ExactAndWildcardEntriesMatchAsDocumented) {
  Allowlist a({"example.com", "*.Wild.Test.", "pypi.org"});
  EXPECT_TRUE(a.allows("example.com"));
  EXPECT_TRUE(a.allows("EXAMPLE.com."));
  EXPECT_FALSE(a.allows("api.example.com"));  // exact means exact
  EXPECT_TRUE(a.allows("a.wild.test"));
  EXPECT_TRUE(a.allows("x.y.wild.test"));
  EXPECT_FALSE(a.allows("wild.test"));  // "*.x" covers subdomains only
  EXPECT_FALSE(a.allows("notwild.test"));
  EXPECT_FALSE(a.allows("github.com"));
  EXPECT_TRUE(Allowlist({}).empty());
}

TEST(NetPolicy, FullEgressPassesAllButTheSegmentAndSpecialAddresses) {
  EgressPolicy p(NetConfig{});
  auto v = [&](const char* dst, uint16_t port, uint8_t proto = kProtoTcp) {
    return p.classify(*parse_ipv4(frame(kGuestAddress, 40000, dst, port, proto)));
  };
  EXPECT_EQ(v("93.184.216.34", 443), Verdict::Pass);
  EXPECT_EQ(v(kHostAlias, 8080), Verdict::Pass);  // the host is allowed with full egress
  EXPECT_EQ(v(kGatewayAddress, 53, kProtoUdp), Verdict::Resolver);
  EXPECT_EQ(v(kGatewayAddress, 53), Verdict::Refuse);    // DNS over TCP is not served
  EXPECT_EQ(v(kGatewayAddress, 8080), Verdict::Refuse);  // libslirp would map it to the host's resolver
  EXPECT_EQ(v("192.168.127.77", 80), Verdict::Refuse);
  EXPECT_EQ(v("0.0.0.0", 80), Verdict::Refuse);
  EXPECT_EQ(v("127.0.0.1", 80), Verdict::Refuse);
  EXPECT_EQ(v("255.255.255.255", 67, kProtoUdp), Verdict::Refuse);
  EXPECT_TRUE(p.name_allowed("anything.example"));
  EXPECT_TRUE(p.name_allowed(kHostAliasName));
  // A spoofed source is refused whatever the destination.
  EXPECT_EQ(p.classify(*parse_ipv4(frame("10.0.0.9", 1, "93.184.216.34", 443, kProtoTcp))), Verdict::Refuse);
}

TEST(NetPolicy, AllowlistPassesOnlyAddressesResolvedFromAllowedNames) {
  EgressPolicy p(allowing({"allowed.test"}));
  auto v = [&](const char* dst) { return p.classify(*parse_ipv4(frame(kGuestAddress, 40000, dst, 443, kProtoTcp))); };
  EXPECT_TRUE(p.filtering());
  EXPECT_FALSE(p.host_allowed());
  EXPECT_FALSE(p.name_allowed(kHostAliasName));
  EXPECT_FALSE(p.name_allowed("other.test"));
  EXPECT_EQ(v("198.51.100.10"), Verdict::Refuse);  // hard-coded, never resolved
  p.learn(ipv4_from_string("198.51.100.10"));
  EXPECT_EQ(v("198.51.100.10"), Verdict::Pass);
  EXPECT_EQ(v("198.51.100.11"), Verdict::Refuse);
  EXPECT_EQ(v(kHostAlias), Verdict::Refuse);
  EgressPolicy with_host(allowing({"allowed.test", kHostAliasName}));
  EXPECT_TRUE(with_host.host_allowed());
  EXPECT_EQ(with_host.classify(*parse_ipv4(frame(kGuestAddress, 1, kHostAlias, 80, kProtoTcp))), Verdict::Pass);
}

TEST(NetDns, ParsesAOneQuestionQueryAndAnswersIt) {
  std::string q = dns_query("Api.Example.COM");
  auto parsed = parse_dns_query(q);
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed->id, 0x1234);
  EXPECT_EQ(parsed->name, "api.example.com");
  EXPECT_EQ(parsed->qtype, kDnsTypeA);
  std::string a = build_dns_answer(q, *parsed, ipv4_from_string("192.0.2.44"));
  EXPECT_EQ(static_cast<uint8_t>(a[0]), 0x12);
  EXPECT_TRUE(static_cast<uint8_t>(a[2]) & 0x80);  // a response
  auto addrs = dns_answer_addresses(a);
  ASSERT_EQ(addrs.size(), 1u);
  EXPECT_EQ(ipv4_to_string(addrs[0]), "192.0.2.44");
  // The sinkhole answer is a real record: 0.0.0.0.
  auto sink = dns_answer_addresses(build_dns_answer(q, *parsed, 0u));
  ASSERT_EQ(sink.size(), 1u);
  EXPECT_EQ(sink[0], 0u);
  // AAAA gets an empty NOERROR, never a v6 address the filter does not know.
  std::string q6 = dns_query("api.example.com", kDnsTypeAaaa);
  EXPECT_TRUE(dns_answer_addresses(build_dns_answer(q6, *parse_dns_query(q6), 0u)).empty());
}

// An answer too large for the guest is replaced by the question with TC set (and
// the upstream's code), never cut into a message the guest cannot parse.
TEST(NetDns, ATooLargeAnswerBecomesAnEmptyTruncatedOne) {
  std::string query(
      "\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x03"
      "big\x04"
      "test\x00\x00\x01\x00\x01",
      26);
  auto q = parse_dns_query(query);
  ASSERT_TRUE(q.has_value());
  std::string upstream = query;
  upstream[2] = '\x81';
  upstream[3] = '\x80';  // QR RD RA, NOERROR
  upstream.append(5000, 'x');
  std::string r = build_truncated_dns_reply(query, *q, upstream);
  ASSERT_EQ(r.size(), query.size());
  EXPECT_EQ(r.substr(0, 2), "\x12\x34");
  EXPECT_EQ(static_cast<uint8_t>(r[2]), 0x83) << "QR, TC and RD";
  EXPECT_EQ(static_cast<uint8_t>(r[3]), 0x80);
  EXPECT_EQ(r.substr(4, 8), std::string("\x00\x01\x00\x00\x00\x00\x00\x00", 8));
  EXPECT_EQ(r.substr(12), query.substr(12));
  EXPECT_TRUE(dns_answer_addresses(r).empty());
}

TEST(NetDns, HostileMessagesAreRejectedWithoutReadingPastTheEnd) {
  std::string q = dns_query("example.com");
  for (size_t len = 0; len < q.size(); ++len) EXPECT_FALSE(parse_dns_query(q.substr(0, len)).has_value()) << len;
  std::string response = q;
  response[2] = static_cast<char>(0x81);
  EXPECT_FALSE(parse_dns_query(response).has_value());  // not a query
  std::string two = q;
  two[5] = 2;
  EXPECT_FALSE(parse_dns_query(two).has_value());
  std::string compressed = q;
  compressed[12] = static_cast<char>(0xc0);
  EXPECT_FALSE(parse_dns_query(compressed).has_value());
  // A response whose answer claims more data than there is, and a pointer loop.
  std::string a = build_dns_answer(q, *parse_dns_query(q), 0x01020304u);
  for (size_t len = 0; len < a.size(); ++len) (void)dns_answer_addresses(a.substr(0, len));
  std::string loop = a;
  loop[7] = 5;  // five answers, the rest missing
  EXPECT_LE(dns_answer_addresses(loop).size(), 1u);
}

TEST(NetPacket, ParsesFramesAndRejectsTruncatedOnes) {
  std::string f = frame(kGuestAddress, 40000, "203.0.113.5", 443, kProtoTcp);
  auto v = parse_ipv4(f);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(ipv4_to_string(v->dst), "203.0.113.5");
  EXPECT_EQ(v->sport, 40000);
  EXPECT_EQ(v->dport, 443);
  EXPECT_EQ(v->tcp_flags, kTcpSyn);
  for (size_t len = 0; len < f.size(); ++len) EXPECT_FALSE(parse_ipv4(f.substr(0, len)).has_value()) << len;
  std::string bad_ihl = f;
  bad_ihl[14] = 0x44;
  EXPECT_FALSE(parse_ipv4(bad_ihl).has_value());
  std::string udp = frame(kGuestAddress, 5000, kGatewayAddress, 53, kProtoUdp, "abc");
  auto u = parse_ipv4(udp);
  ASSERT_TRUE(u.has_value());
  EXPECT_EQ(udp.substr(u->payload_offset, u->payload_size), "abc");
}

// QEMU's stream link: frames after their 4-byte big-endian lengths, a partial one
// kept for the next read, an absurd length refused (boxlite-net closes the link).
TEST(NetPacket, StreamLinkFramesAreSplitByTheirLengths) {
  std::string buf = std::string("\0\0\0\3abc\0\0\0\0\0\0\0\5de", 17);
  std::vector<std::string> frames;
  auto used = split_stream_frames(buf, [&](std::string_view f) { frames.emplace_back(f); });
  ASSERT_TRUE(used);
  EXPECT_EQ(*used, 11u) << "the partial third frame waits";
  EXPECT_EQ(frames, (std::vector<std::string>{"abc", ""}));
  EXPECT_FALSE(split_stream_frames(std::string("\0\1\0\1", 4), [](std::string_view) {})) << "65537 bytes";
  EXPECT_EQ(split_stream_frames(std::string("\0\1", 2), [](std::string_view) {}), 0u);
}

TEST(NetPacket, BuiltRepliesHaveValidChecksumsAndSwappedEndpoints) {
  std::string syn = frame(kGuestAddress, 40000, "203.0.113.5", 443, kProtoTcp);
  auto req = *parse_ipv4(syn);
  std::string rst = build_tcp_reset(syn, req);
  auto r = parse_ipv4(rst);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(ipv4_to_string(r->src), "203.0.113.5");
  EXPECT_EQ(ipv4_to_string(r->dst), kGuestAddress);
  EXPECT_EQ(r->sport, 443);
  EXPECT_EQ(r->dport, 40000);
  EXPECT_EQ(r->tcp_flags, kTcpRst | kTcpAck);
  EXPECT_EQ(rst.substr(0, 6), syn.substr(6, 6));
  const auto* ip = reinterpret_cast<const uint8_t*>(rst.data() + kEthHeader);
  EXPECT_EQ(inet_checksum(ip, 20), 0);  // a valid header sums to zero
  // TCP checksum over the pseudo-header must verify too.
  uint32_t pseudo = (r->src >> 16) + (r->src & 0xffff) + (r->dst >> 16) + (r->dst & 0xffff) + kProtoTcp + 20;
  EXPECT_EQ(inet_checksum(ip + 20, 20, pseudo), 0);

  std::string query = frame(kGuestAddress, 5353, kGatewayAddress, 53, kProtoUdp, "q");
  std::string reply = build_udp_reply(query, *parse_ipv4(query), "answer");
  auto u = parse_ipv4(reply);
  ASSERT_TRUE(u.has_value());
  EXPECT_EQ(u->sport, 53);
  EXPECT_EQ(u->dport, 5353);
  EXPECT_EQ(reply.substr(u->payload_offset, u->payload_size), "answer");
}

TEST(NetConfig, JsonRoundTripAndValidation) {
  NetConfig c;
  c.allow_net = {"example.com", "*.pypi.org"};
  c.ports = {PortForward{"127.0.0.1", 8080, 80, false}, PortForward{"0.0.0.0", 5353, 53, true}};
  c.dns_upstream = "127.0.0.1:5300";
  c.binary = "/x/boxlite-net";
  NetConfig back = config_from_json(config_to_json(c));
  EXPECT_EQ(back.allow_net, c.allow_net);
  ASSERT_EQ(back.ports.size(), 2u);
  EXPECT_EQ(back.ports[1].host_port, 5353);
  EXPECT_TRUE(back.ports[1].udp);
  EXPECT_EQ(back.dns_upstream, c.dns_upstream);
  EXPECT_NO_THROW(validate_config(c));
  for (const char* bad : {"", "*.", "a..b", "exa mple.com", "*", "x/y", "*.*.com"}) {
    NetConfig b;
    b.allow_net = {bad};
    EXPECT_THROW(validate_config(b), Error) << bad;
  }
  EXPECT_THROW(config_from_json("{}"), Error);
}

// Found by the fuzzer (tests/fuzz/corpus/config/crash-float-port): a port of 6e60
// was converted to uint16_t (undefined behaviour; 70000 became 4464). A port that
// is not an integer in 0..65535 is a Config error naming the field.
TEST(NetConfig, APortThatIsNoPortNumberIsRefused) {
  auto with_port = [](const std::string& port) {
    return R"({"enabled": true, "allow_net": [], "dns_upstream": "", "binary": "b", "ports": [{"host_ip": "0.0.0.0",
               "host_port": )" +
           port + R"(, "guest_port": 80, "udp": false}]})";
  };
  EXPECT_EQ(config_from_json(with_port("8080")).ports.at(0).host_port, 8080);
  for (const char* bad : {"6e60", "70000", "-1", "80.5", "\"80\""}) {
    try {
      config_from_json(with_port(bad));
      ADD_FAILURE() << bad << " accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Config) << bad;
      EXPECT_NE(std::string(e.what()).find("'host_port'"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace boxlite::net

namespace boxlite::net {
namespace {

TEST(NetSecrets, PlaceholdersAreReplacedInHeadersQueryAndBodyButNotThePath) {
  SecretRule key{"key", "<BOXLITE_SECRET:key>", "REAL-VALUE", {"api.test"}};
  std::string head =
      "POST /v1/<BOXLITE_SECRET:key>/items?token=<BOXLITE_SECRET:key>&x=1 HTTP/1.1\r\n"
      "Host: api.test\r\nAuthorization: Bearer <BOXLITE_SECRET:key>\r\nContent-Length: 27\r\n"
      "Connection: keep-alive\r\n\r\n";
  std::string out = rewrite_request(head, "{\"k\":\"<BOXLITE_SECRET:key>\"}", {&key});
  EXPECT_NE(out.find("POST /v1/<BOXLITE_SECRET:key>/items?token=REAL-VALUE&x=1 HTTP/1.1\r\n"), std::string::npos)
      << out;
  EXPECT_NE(out.find("Authorization: Bearer REAL-VALUE\r\n"), std::string::npos) << out;
  EXPECT_NE(out.find("Content-Length: 18\r\n"), std::string::npos) << out;
  EXPECT_NE(out.find("Connection: close\r\n\r\n{\"k\":\"REAL-VALUE\"}"), std::string::npos) << out;
  EXPECT_EQ(out.find("keep-alive"), std::string::npos);
  // No rules: the request goes on with its placeholders.
  std::string plain = rewrite_request(head, "{\"k\":\"<BOXLITE_SECRET:key>\"}", {});
  EXPECT_EQ(plain.find("REAL-VALUE"), std::string::npos);
  EXPECT_NE(plain.find("Bearer <BOXLITE_SECRET:key>"), std::string::npos);
}

// A chunked body is decoded whole (so a placeholder split across chunks is still
// replaced) and goes on with a Content-Length.
TEST(NetSecrets, ChunkedBodiesAreDecodedAndSentWithALength) {
  std::string wire = "6;ext=1\r\nbody=<\r\n13\r\nBOXLITE_SECRET:key>\r\n0\r\nTrailer: x\r\n\r\n";
  // Fed in 5-byte reads after the first 4 bytes, as a socket might deliver them.
  std::string buffered = wire.substr(0, 4);
  size_t pos = 4;
  auto reader = [&](char* b, int n) {
    int k = static_cast<int>(std::min<size_t>({5, static_cast<size_t>(n), wire.size() - pos}));
    std::memcpy(b, wire.data() + pos, static_cast<size_t>(k));
    pos += static_cast<size_t>(k);
    return k;
  };
  std::string body;
  ASSERT_TRUE(read_chunked_body(buffered, reader, body, 1024));
  EXPECT_EQ(body, "body=<BOXLITE_SECRET:key>");
  SecretRule key{"key", "<BOXLITE_SECRET:key>", "REAL", {}};
  std::string out = rewrite_request("POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n", body, {&key});
  EXPECT_EQ(out.find("Transfer-Encoding"), std::string::npos) << out;
  EXPECT_NE(out.find("Content-Length: 9\r\nConnection: close\r\n\r\nbody=REAL"), std::string::npos) << out;

  auto decode = [](std::string wire_text, size_t max) {
    std::string out_body;
    auto eof = [](char*, int) { return 0; };
    return read_chunked_body(wire_text, eof, out_body, max);
  };
  EXPECT_FALSE(decode("zz\r\nabc\r\n0\r\n\r\n", 1024)) << "not a hex size";
  EXPECT_FALSE(decode("3\r\nabcX\r\n0\r\n\r\n", 1024)) << "chunk longer than its size";
  EXPECT_FALSE(decode("3\r\nabc\r\n", 1024)) << "EOF before the last chunk";
  EXPECT_FALSE(decode("10\r\n0123456789abcdef\r\n0\r\n\r\n", 8)) << "over the body limit";
  EXPECT_FALSE(decode("fffffffff\r\n", 1u << 30)) << "absurd size";
  EXPECT_TRUE(decode("0\r\n\r\n", 8));
}

TEST(NetSecrets, HostsMatchExactlyOrByWildcardAndEmptyMeansAny) {
  std::vector<SecretRule> s = {
      {"a", "<A>", "1", {"api.openai.com"}}, {"b", "<B>", "2", {"*.example.com"}}, {"c", "<C>", "3", {}}};
  auto names = [&](const std::string& host) {
    std::string out;
    for (const auto* r : secrets_for_host(s, host)) out += r->name;
    return out;
  };
  EXPECT_EQ(names("api.openai.com"), "ac");
  EXPECT_EQ(names("openai.com"), "c");  // documented: openai.com does not match api.openai.com
  EXPECT_EQ(names("x.example.com"), "bc");
  EXPECT_EQ(names("example.com"), "c");
}

// The TLS name alone does not choose a secret: the request's own Host (and an
// absolute-form target's host) must be on the secret's list too, or a box could
// front one host's certificate and have its secret routed to another behind it.
TEST(NetSecrets, TheRequestsOwnHostMustBeOnTheSecretsListToo) {
  std::vector<SecretRule> s = {{"a", "<A>", "1", {"api.openai.com"}}, {"c", "<C>", "3", {}}};
  auto names = [&](const std::string& sni, const std::string& head) {
    std::string out;
    for (const auto* r : secrets_for_request(s, sni, head)) out += r->name;
    return out;
  };
  EXPECT_EQ(names("api.openai.com", "POST /v1 HTTP/1.1\r\nHost: api.openai.com\r\n\r\n"), "ac");
  EXPECT_EQ(names("api.openai.com", "POST /v1 HTTP/1.1\r\nhost: API.OpenAI.com:443\r\n\r\n"), "ac");
  EXPECT_EQ(names("api.openai.com", "POST /v1 HTTP/1.1\r\n\r\n"), "ac") << "HTTP/1.0 style: no Host";
  EXPECT_EQ(names("api.openai.com", "POST /v1 HTTP/1.1\r\nHost: evil.example\r\n\r\n"), "c");
  EXPECT_EQ(names("api.openai.com", "POST https://evil.example/v1 HTTP/1.1\r\nHost: api.openai.com\r\n\r\n"), "c");
  EXPECT_EQ(names("api.openai.com", "GET / HTTP/1.1\r\nHost: api.openai.com\r\nHost: evil.example\r\n\r\n"), "")
      << "two Host headers: nothing";
  EXPECT_EQ(names("evil.example", "POST /v1 HTTP/1.1\r\nHost: api.openai.com\r\n\r\n"), "c");
}

// Found by the fuzzer (tests/fuzz/http_request_fuzz.cpp): a request line with two
// spaces hid its absolute-form target from the check, and so did an empty line
// before it, or a userinfo before the host; each then got a secret scoped to
// another host. Every host a server may read there is checked now.
TEST(NetSecrets, AnAbsoluteTargetIsFoundHoweverTheRequestLineIsLaidOut) {
  std::vector<SecretRule> s = {{"a", "<A>", "1", {"api.openai.com"}}, {"c", "<C>", "3", {}}};
  auto names = [&](const std::string& head) {
    std::string out;
    for (const auto* r : secrets_for_request(s, "api.openai.com", head)) out += r->name;
    return out;
  };
  EXPECT_EQ(names("GET  https://evil.example/?k=<A> HTTP/1.1\r\nHost: api.openai.com\r\n\r\n"), "c");
  EXPECT_EQ(names("GET\thttps://evil.example/ HTTP/1.1\r\nHost: api.openai.com\r\n\r\n"), "c");
  EXPECT_EQ(names("\r\nGET https://evil.example/ HTTP/1.1\r\nHost: api.openai.com\r\n\r\n"), "c");
  EXPECT_EQ(names("GET https://api.openai.com:@evil.example/ HTTP/1.1\r\n\r\n"), "c");
  EXPECT_EQ(names("GET / HTTP/1.1\r\nHost: api.openai.com@evil.example\r\n\r\n"), "c");
  EXPECT_EQ(names("GET https://user@api.openai.com/v1 HTTP/1.1\r\nHost: api.openai.com\r\n\r\n"), "ac");
  EXPECT_EQ(names("\r\nGET /v1 HTTP/1.1\r\nHost: api.openai.com\r\n\r\n"), "ac");
}

// A request read off the box's connection (read_request_for_upstream): its body is
// what Content-Length says, and a request pipelined after it goes nowhere, so its
// placeholders are never replaced for hosts nobody checked.
TEST(NetSecrets, OnlyTheFirstRequestOfAConnectionGoesUpstream) {
  std::vector<SecretRule> s = {{"c", "<C>", "REAL", {}}};
  auto upstream = [&](const std::string& wire) {
    size_t pos = 0;
    auto reader = [&](char* b, int n) {
      int k = static_cast<int>(std::min<size_t>({7, static_cast<size_t>(n), wire.size() - pos}));
      std::memcpy(b, wire.data() + pos, static_cast<size_t>(k));
      pos += static_cast<size_t>(k);
      return k;
    };
    return read_request_for_upstream(reader, s, "api.test");
  };
  auto out = upstream(
      "POST /x HTTP/1.1\r\nHost: api.test\r\nContent-Length: 3\r\n\r\n<C>"
      "GET / HTTP/1.1\r\nHost: evil.example\r\nX: <C>\r\n\r\n");
  ASSERT_TRUE(out);
  EXPECT_EQ(*out, "POST /x HTTP/1.1\r\nHost: api.test\r\nContent-Length: 4\r\nConnection: close\r\n\r\nREAL");
  out = upstream("GET / HTTP/1.1\r\nHost: api.test\r\n\r\nGET /2 HTTP/1.1\r\nX: <C>\r\n\r\n");
  ASSERT_TRUE(out);
  EXPECT_EQ(*out, "GET / HTTP/1.1\r\nHost: api.test\r\nConnection: close\r\n\r\n");
  EXPECT_FALSE(upstream("POST /x HTTP/1.1\r\nContent-Length: 10\r\n\r\nshort")) << "EOF inside the body";
  EXPECT_FALSE(upstream("GET / HTTP/1.1\r\nHost: api.test\r\n")) << "EOF inside the head";
}

}  // namespace
}  // namespace boxlite::net

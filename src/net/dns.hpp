// The DNS messages the box's resolver at .1 handles: one-question queries in,
// sinkhole answers out, and the A records of upstream answers (which IPs an
// allowed name resolved to). Everything is bounds-checked: queries are hostile.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace boxlite::net {

inline constexpr uint16_t kDnsTypeA = 1, kDnsTypeAaaa = 28, kDnsClassIn = 1;

struct DnsQuestion {
  uint16_t id = 0;
  std::string name;  // lowercase, no trailing dot
  uint16_t qtype = 0, qclass = 0;
  size_t end = 0;  // offset just past the question
};

// nullopt unless a standard query (QR=0, opcode 0) with exactly one question.
std::optional<DnsQuestion> parse_dns_query(std::string_view msg);

// An authoritative-looking answer to `query`: for an A question with `address`
// (host order) one A record, otherwise NOERROR with no records.
std::string build_dns_answer(std::string_view query, const DnsQuestion& q, std::optional<uint32_t> address);

// `query`'s question answered with the upstream reply's flags and code, no records,
// and TC set: what a resolver says of an answer too large to send over UDP (the
// client may then retry over TCP), instead of a cut message it cannot parse.
std::string build_truncated_dns_reply(std::string_view query, const DnsQuestion& q, std::string_view reply);

// The A records (host order) in a response's answer section; empty when malformed.
std::vector<uint32_t> dns_answer_addresses(std::string_view response);

}  // namespace boxlite::net

// The egress policy of a box: which names resolve (allow_net), and which
// destinations a guest packet may reach. Decided on the host, before libslirp
// sees the packet, so nothing the guest does (hard-coded IPs, the host alias,
// its own resolver) gets around it.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "net/config.hpp"
#include "net/packet.hpp"

namespace boxlite::net {

class Allowlist {
 public:
  explicit Allowlist(const std::vector<std::string>& entries);
  bool empty() const { return exact_.empty() && suffixes_.empty(); }
  // Exact match, or "*.x" matching any name ending in ".x" (not x itself).
  bool allows(const std::string& name) const;

 private:
  std::set<std::string> exact_;
  std::vector<std::string> suffixes_;  // ".x" for "*.x"
};

enum class Verdict {
  Pass,      // hand to libslirp
  Resolver,  // a DNS query to .1:53, answered by the box's resolver
  Refuse,    // drop; a TCP SYN also gets a reset so the guest fails at once
};

class EgressPolicy {
 public:
  explicit EgressPolicy(const NetConfig& cfg);
  // For a packet from the guest.
  Verdict classify(const Ipv4View& p) const;
  // Names the resolver may answer; the host alias only when the host is allowed.
  bool name_allowed(const std::string& name) const;
  bool host_allowed() const { return host_allowed_; }
  bool filtering() const { return !allow_.empty(); }
  // An address an allowed name resolved to (host order) becomes reachable.
  void learn(uint32_t addr) { resolved_.insert(addr); }

 private:
  Allowlist allow_;
  bool host_allowed_;
  std::set<uint32_t> resolved_;
  uint32_t network_, gateway_, host_alias_, guest_;
};

}  // namespace boxlite::net

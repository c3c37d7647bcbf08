#include "net/policy.hpp"

namespace boxlite::net {

Allowlist::Allowlist(const std::vector<std::string>& entries) {
  for (const auto& raw : entries) {
    std::string e = normalize_host(raw);
    if (e.rfind("*.", 0) == 0) {
      suffixes_.push_back(e.substr(1));
    } else if (!e.empty()) {
      exact_.insert(e);
    }
  }
}

bool Allowlist::allows(const std::string& raw) const {
  std::string name = normalize_host(raw);
  if (exact_.count(name)) return true;
  for (const auto& s : suffixes_) {
    if (name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0) return true;
  }
  return false;
}

EgressPolicy::EgressPolicy(const NetConfig& cfg)
    : allow_(cfg.allow_net),
      // The host's loopback is egress too: open with full egress, else only when listed.
      host_allowed_(cfg.allow_net.empty() || allow_.allows(kHostAliasName)),
      network_(ipv4_from_string(kGatewayAddress) & 0xffffff00u),
      gateway_(ipv4_from_string(kGatewayAddress)),
      host_alias_(ipv4_from_string(kHostAlias)),
      guest_(ipv4_from_string(kGuestAddress)) {}

bool EgressPolicy::name_allowed(const std::string& name) const {
  if (normalize_host(name) == kHostAliasName) return host_allowed_;
  return allow_.empty() || allow_.allows(name);
}

Verdict EgressPolicy::classify(const Ipv4View& p) const {
  if (p.src != guest_) return Verdict::Refuse;  // spoofed source
  if ((p.dst & 0xffffff00u) == network_) {
    // The box's own segment: the resolver, and the host alias if allowed. Nothing
    // else: libslirp would map other .x addresses to the host or its resolver.
    if (p.dst == gateway_ && p.proto == kProtoUdp && !p.fragment && p.dport == 53) return Verdict::Resolver;
    if (p.dst == host_alias_ && host_allowed_) return Verdict::Pass;
    return Verdict::Refuse;
  }
  uint32_t top = p.dst >> 24;
  if (top == 0 || top == 127 || top >= 224) return Verdict::Refuse;  // "this" network, loopback, multicast, broadcast
  if (allow_.empty()) return Verdict::Pass;
  return resolved_.count(p.dst) ? Verdict::Pass : Verdict::Refuse;
}

}  // namespace boxlite::net

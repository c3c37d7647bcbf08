#include "net/config.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <set>

#include <nlohmann/json.hpp>

#include "common/error.hpp"

namespace boxlite::net {

std::string config_to_json(const NetConfig& c) {
  nlohmann::json ports = nlohmann::json::array();
  for (const auto& p : c.ports) {
    ports.push_back({{"host_ip", p.host_ip}, {"host_port", p.host_port}, {"guest_port", p.guest_port}, {"udp", p.udp}});
  }
  nlohmann::json secrets = nlohmann::json::array();
  for (const auto& s : c.secrets) {
    secrets.push_back({{"name", s.name}, {"placeholder", s.placeholder}, {"value", s.value}, {"hosts", s.hosts}});
  }
  nlohmann::json j = {{"enabled", c.enabled},           {"allow_net", c.allow_net}, {"ports", ports},
                      {"dns_upstream", c.dns_upstream}, {"binary", c.binary},       {"secrets", secrets},
                      {"ca_cert", c.ca_cert},           {"ca_key", c.ca_key},       {"upstream_ca", c.upstream_ca}};
  return j.dump();
}

namespace {

// A port number field: a JSON integer in 0..65535. nlohmann would convert any
// number, a float out of range included (undefined behaviour, found by the fuzzer).
uint16_t port_field(const nlohmann::json& p, const char* key) {
  const auto& v = p.at(key);
  if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > 65535) {
    throw Error(ErrorKind::Config, std::string("invalid network config: '") + key + "' is " + v.dump() +
                                       ", not a port number (0 to 65535)");
  }
  return static_cast<uint16_t>(v.get<int64_t>());
}

}  // namespace

NetConfig config_from_json(const std::string& text) {
  try {
    auto j = nlohmann::json::parse(text);
    NetConfig c;
    c.enabled = j.at("enabled");
    c.allow_net = j.at("allow_net").get<std::vector<std::string>>();
    for (const auto& p : j.at("ports")) {
      c.ports.push_back(
          PortForward{p.at("host_ip"), port_field(p, "host_port"), port_field(p, "guest_port"), p.at("udp")});
    }
    c.dns_upstream = j.at("dns_upstream");
    c.binary = j.at("binary");
    for (const auto& s : j.value("secrets", nlohmann::json::array())) {
      c.secrets.push_back(
          SecretRule{s.at("name"), s.at("placeholder"), s.at("value"), s.at("hosts").get<std::vector<std::string>>()});
    }
    c.ca_cert = j.value("ca_cert", "");
    c.ca_key = j.value("ca_key", "");
    c.upstream_ca = j.value("upstream_ca", "");
    return c;
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorKind::Config, std::string("invalid network config: ") + e.what());
  }
}

std::string normalize_host(const std::string& name) {
  std::string out = name;
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  while (!out.empty() && out.back() == '.') out.pop_back();
  return out;
}

namespace {

// A DNS name (RFC 1035 letters, digits, hyphens, underscores; 253 chars; labels
// of 1..63), optionally preceded by "*." for the documented wildcard form.
bool valid_allow_entry(const std::string& raw) {
  std::string name = normalize_host(raw);
  if (name.rfind("*.", 0) == 0) name = name.substr(2);
  if (name.empty() || name.size() > 253) return false;
  size_t label = 0;
  for (char ch : name) {
    if (ch == '.') {
      if (label == 0) return false;
      label = 0;
      continue;
    }
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '-' && ch != '_') return false;
    if (++label > 63) return false;
  }
  return label > 0;
}

}  // namespace

void validate_config(const NetConfig& c) {
  if (!c.enabled && (!c.allow_net.empty() || !c.ports.empty())) {
    throw Error(ErrorKind::InvalidArgument, std::string("network mode is 'disabled' but ") +
                                                (c.ports.empty() ? "allow_net" : "ports") +
                                                " were given: a box without a network cannot use them");
  }
  for (const auto& a : c.allow_net) {
    if (!valid_allow_entry(a)) {
      throw Error(ErrorKind::InvalidArgument,
                  "invalid allow_net entry '" + a + "': expected a host name such as 'example.com' or '*.example.com'");
    }
  }
  for (const auto& s : c.secrets) {
    if (s.placeholder.empty() || s.value.empty()) {
      throw Error(ErrorKind::InvalidArgument, "secret '" + s.name + "' needs a non-empty value and placeholder");
    }
    for (const auto& h : s.hosts) {
      if (!valid_allow_entry(h)) {
        throw Error(ErrorKind::InvalidArgument, "invalid host '" + h + "' for secret '" + s.name +
                                                    "': expected 'api.example.com' or '*.example.com'");
      }
    }
  }
  std::set<std::tuple<std::string, uint16_t, bool>> seen;
  for (const auto& p : c.ports) {
    in_addr a{};
    if (::inet_pton(AF_INET, p.host_ip.c_str(), &a) != 1) {
      throw Error(ErrorKind::InvalidArgument, "invalid host_ip '" + p.host_ip + "' for port " +
                                                  std::to_string(p.guest_port) + ": expected an IPv4 address");
    }
    if (p.guest_port == 0 || p.host_port == 0) {
      throw Error(ErrorKind::InvalidArgument, "port numbers must be between 1 and 65535 (guest " +
                                                  std::to_string(p.guest_port) + ", host " +
                                                  std::to_string(p.host_port) + ")");
    }
    if (!seen.insert({p.host_ip, p.host_port, p.udp}).second) {
      throw Error(ErrorKind::InvalidArgument,
                  "host port " + std::to_string(p.host_port) + "/" + (p.udp ? "udp" : "tcp") + " is published twice");
    }
  }
}

}  // namespace boxlite::net

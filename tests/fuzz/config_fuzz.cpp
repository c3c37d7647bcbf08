// The JSON configuration a user or a tool hands us: <home>/config.json as the
// runtime reads it (core/home_config.hpp), a registry config file (--config,
// registry/config.hpp), the CLI's --registry form, and the network process's
// config (net/config.hpp, shim.json's "net"). Checks: every refusal is a Config
// error (InvalidArgument for a network config that parses but is invalid); what
// is accepted passes validation and survives the registries' JSON round trip.
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "core/home_config.hpp"
#include "fuzz/fuzz_support.hpp"
#include "net/config.hpp"
#include "registry/config.hpp"

namespace {

using namespace boxlite;

void check_registries(const std::vector<registry::ImageRegistry>& regs) {
  for (const auto& r : regs) registry::validate(r);  // throws, and so fails, if not
  auto again = registry::registries_from_json(registry::registries_to_json(regs), "round trip");
  fuzz::check(again.size() == regs.size(), "registries lost in a JSON round trip");
  for (size_t i = 0; i < regs.size(); ++i) {
    fuzz::check(again[i].host == regs[i].host && again[i].transport == regs[i].transport &&
                    again[i].skip_verify == regs[i].skip_verify && again[i].search == regs[i].search &&
                    again[i].username == regs[i].username && again[i].password == regs[i].password &&
                    again[i].bearer_token == regs[i].bearer_token,
                "a registry changed in a JSON round trip");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(fuzz::as_text(data, size));
  try {
    core::HomeConfig c = core::parse_home_config(text, "/home/u/.boxlite/config.json", true);
    if (c.registries) check_registries(*c.registries);
  } catch (const Error& e) {
    fuzz::check_error(e, {ErrorKind::Config});
  }
  try {
    check_registries(registry::registries_from_config_text(text, "registries.json"));
  } catch (const Error& e) {
    fuzz::check_error(e, {ErrorKind::Config});
  }
  try {
    check_registries({registry::parse_registry_flag(text)});
  } catch (const Error& e) {
    fuzz::check_error(e, {ErrorKind::Config});
  }
  try {
    net::NetConfig c = net::config_from_json(text);
    try {
      net::validate_config(c);
    } catch (const Error& e) {
      fuzz::check_error(e, {ErrorKind::InvalidArgument});
    }
    net::NetConfig again = net::config_from_json(net::config_to_json(c));
    fuzz::check(again.allow_net == c.allow_net && again.ports.size() == c.ports.size() &&
                    again.secrets.size() == c.secrets.size(),
                "a network config changed in a JSON round trip");
  } catch (const Error& e) {
    fuzz::check_error(e, {ErrorKind::Config});
  }
  return 0;
}

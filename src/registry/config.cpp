#include "registry/config.hpp"

#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "common/io.hpp"

namespace boxlite::registry {

namespace {

[[noreturn]] void config_error(const std::string& msg) { throw Error(ErrorKind::Config, msg); }

std::optional<std::string> optional_string(const nlohmann::json& obj, const char* key, const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::nullopt;
  if (!it->is_string()) config_error(where + ": '" + key + "' must be a string");
  return it->get<std::string>();
}

bool bool_field(const nlohmann::json& obj, const char* key, bool def, const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return def;
  if (!it->is_boolean()) config_error(where + ": '" + key + "' must be true or false");
  return it->get<bool>();
}

bool parse_bool_word(const std::string& v, const std::string& spec) {
  if (v == "true" || v == "1" || v == "yes") return true;
  if (v == "false" || v == "0" || v == "no") return false;
  config_error("invalid --registry '" + spec + "': expected true or false, got '" + v + "'");
}

}  // namespace

void validate(const ImageRegistry& r) {
  if (r.host.empty()) config_error("image registry host is required");
  if (r.host.find("://") != std::string::npos || r.host.find('/') != std::string::npos) {
    config_error("image registry host must be host[:port], not a URL: " + r.host);
  }
  if (r.transport != "https" && r.transport != "http") config_error("unsupported registry transport: " + r.transport);
  if (r.username.has_value() != r.password.has_value())
    config_error("registry username and password must be provided together");
}

std::vector<ImageRegistry> registries_from_json(const nlohmann::json& array, const std::string& where) {
  if (!array.is_array()) config_error(where + ": 'image_registries' must be an array");
  static const char* const kKeys[] = {"host",     "transport", "skip_verify", "search",
                                      "username", "password",  "bearer_token"};
  std::vector<ImageRegistry> out;
  for (const auto& item : array) {
    std::string at = where + ": image_registries[" + std::to_string(out.size()) + "]";
    if (!item.is_object()) config_error(at + " must be an object");
    for (const auto& [key, value] : item.items()) {
      bool known = false;
      for (const char* k : kKeys) known = known || key == k;
      if (!known) config_error(at + ": unknown key '" + key + "'");
    }
    ImageRegistry r;
    r.host = optional_string(item, "host", at).value_or("");
    r.transport = optional_string(item, "transport", at).value_or("https");
    r.skip_verify = bool_field(item, "skip_verify", false, at);
    r.search = bool_field(item, "search", false, at);
    r.username = optional_string(item, "username", at);
    r.password = optional_string(item, "password", at);
    r.bearer_token = optional_string(item, "bearer_token", at);
    validate(r);
    out.push_back(std::move(r));
  }
  return out;
}

nlohmann::json registries_to_json(const std::vector<ImageRegistry>& registries) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& r : registries) {
    nlohmann::json item = {
        {"host", r.host}, {"transport", r.transport}, {"skip_verify", r.skip_verify}, {"search", r.search}};
    if (r.username) item["username"] = *r.username;
    if (r.password) item["password"] = *r.password;
    if (r.bearer_token) item["bearer_token"] = *r.bearer_token;
    out.push_back(std::move(item));
  }
  return out;
}

ImageRegistry parse_registry_flag(const std::string& spec) {
  ImageRegistry r;
  r.search = true;
  size_t start = 0;
  bool first = true;
  while (start <= spec.size()) {
    size_t end = spec.find(',', start);
    std::string item = spec.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (first) {
      r.host = item;
      first = false;
    } else {
      auto eq = item.find('=');
      std::string key = item.substr(0, eq), value = eq == std::string::npos ? "true" : item.substr(eq + 1);
      if (key == "transport") {
        r.transport = value;
      } else if (key == "skip_verify") {
        r.skip_verify = parse_bool_word(value, spec);
      } else if (key == "search") {
        r.search = parse_bool_word(value, spec);
      } else {
        config_error(
            "invalid --registry '" + spec + "': unknown setting '" + key +
            "' (expected HOST[,transport=http|https][,skip_verify][,search=false]; credentials go in --config)");
      }
    }
    if (end == std::string::npos) break;
    start = end + 1;
  }
  validate(r);
  return r;
}

std::vector<ImageRegistry> load_config_file(const std::string& path) {
  std::string text;
  try {
    text = read_file(path);
  } catch (const Error& e) {
    config_error("cannot read config file " + path + ": " + e.what());
  }
  return registries_from_config_text(text, path);
}

std::vector<ImageRegistry> registries_from_config_text(const std::string& text, const std::string& path) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    config_error("invalid config file " + path + ": " + e.what());
  }
  if (!j.is_object()) config_error("invalid config file " + path + ": expected a JSON object");
  for (const auto& [key, value] : j.items()) {
    if (key != "image_registries" && key != "engine" && key != "accel") {
      config_error("invalid config file " + path + ": unknown key '" + key + "'");
    }
  }
  auto it = j.find("image_registries");
  if (it == j.end() || it->is_null()) return {};
  return registries_from_json(*it, path);
}

}  // namespace boxlite::registry

// boxlite/images.hpp's names for what front ends use.
namespace boxlite {

void validate_image_registry(const ImageRegistry& r) { registry::validate(r); }
ImageRegistry parse_image_registry_flag(const std::string& spec) { return registry::parse_registry_flag(spec); }
std::vector<ImageRegistry> load_image_registries(const std::string& path) { return registry::load_config_file(path); }

}  // namespace boxlite

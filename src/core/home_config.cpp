#include "core/home_config.hpp"

#include <nlohmann/json.hpp>

#include "boxlite/options.hpp"
#include "common/error.hpp"

namespace boxlite::core {

HomeConfig parse_home_config(const std::string& text, const std::string& path, bool read_registries) {
  HomeConfig c;
  try {
    auto j = nlohmann::json::parse(text);
    if (!j.is_object()) throw Error(ErrorKind::Config, "expected a JSON object");
    for (const auto& [key, value] : j.items()) {
      if (key == "engine" && value.is_string()) {
        c.engine = parse_engine_kind(value.get<std::string>(), "engine");
      } else if (key == "accel" && value.is_string()) {
        c.accel = value.get<std::string>();
      } else if (key == "image_registries") {
        if (read_registries) c.registries = registry::registries_from_json(value, path);
      } else {
        throw Error(ErrorKind::Config, "unknown or mistyped key '" + key + "'");
      }
    }
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorKind::Config, "invalid " + path + ": " + e.what());
  } catch (const Error& e) {
    throw Error(ErrorKind::Config, "invalid " + path + ": " + e.what());
  }
  BoxOptions check;
  check.image = "-";
  check.engine = c.engine;
  check.accel = c.accel;
  try {
    validate_box_options(check);
  } catch (const Error& e) {
    throw Error(ErrorKind::Config, "invalid " + path + ": " + e.what());
  }
  return c;
}

}  // namespace boxlite::core

// Registry configuration: the documented ImageRegistry and where it comes from
// (code, <home>/config.json, `--config FILE`, `--registry SPEC`).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "boxlite/images.hpp"

namespace boxlite::registry {

using ImageRegistry = boxlite::ImageRegistry;  // boxlite/images.hpp

// The documented checks, with the documented messages (Config errors):
//   "image registry host is required"
//   "image registry host must be host[:port], not a URL: <h>"
//   "unsupported registry transport: <t>"
//   "registry username and password must be provided together"
void validate(const ImageRegistry& r);

// {"image_registries": [{"host": ..., "transport": ..., "skip_verify": ...,
//   "search": ..., "username": ..., "password": ..., "bearer_token": ...}, ...]}:
// the array's entries, validated. `where` names the source in errors (Config).
std::vector<ImageRegistry> registries_from_json(const nlohmann::json& array, const std::string& where);

// The inverse of registries_from_json: the array form, credentials included (for
// boxlite-pull, which receives it over a socket, never in argv or the environment).
nlohmann::json registries_to_json(const std::vector<ImageRegistry>& registries);

// The CLI's `--registry HOST[,transport=http|https][,skip_verify][,search=false]`:
// a registry given on the command line takes part in short-name search unless
// told otherwise. Credentials only come from a config file (never argv, which
// other users can read in /proc).
ImageRegistry parse_registry_flag(const std::string& spec);

// `--config FILE`: a JSON object with "image_registries" (other runtime keys of
// <home>/config.json, "engine" and "accel", are accepted and ignored here).
std::vector<ImageRegistry> load_config_file(const std::string& path);
// The same for the file's text (`path` names it in errors).
std::vector<ImageRegistry> registries_from_config_text(const std::string& text, const std::string& path);

}  // namespace boxlite::registry

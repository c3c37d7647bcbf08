// Output formats the CLI shares: YAML for JSON documents (block style; scalars
// are written as JSON, which YAML reads), for `info`, `list`, `inspect`, `stats`.
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>

namespace boxlite::cli {

// An object as a YAML mapping, an array as a sequence, indented by `indent`.
void print_yaml(const nlohmann::json& j, std::ostream& out, int indent = 0);

}  // namespace boxlite::cli

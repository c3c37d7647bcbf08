// Output formats the CLI shares: YAML for JSON documents (block style; scalars
// are written as JSON, which YAML reads), for `info`, `list`, `inspect`, `stats`.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace boxlite::cli {

// A byte count for people: decimal units ("1.5MB", as docker pull shows sizes) or
// binary ones ("1.5 MiB", as memory is shown).
enum class Units { Decimal, Binary };
std::string human_size(double bytes, Units units);

// An object as a YAML mapping, an array as a sequence, indented by `indent`.
void print_yaml(const nlohmann::json& j, std::ostream& out, int indent = 0);

// `s` cut at each `sep` (empty pieces kept).
std::vector<std::string> split(std::string_view s, char sep);
// A monotonic clock in milliseconds, for the CLI's own deadlines.
double now_ms();
// All of `len` bytes to `fd` (a box's output to ours); a failed write is an Error.
void write_out(int fd, const void* data, size_t len);

}  // namespace boxlite::cli

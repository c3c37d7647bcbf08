#include "cli/output.hpp"

#include <cstdio>
#include <string>

namespace boxlite::cli {
namespace {

bool is_block(const nlohmann::json& v) { return (v.is_object() || v.is_array()) && !v.empty(); }

}  // namespace

std::string human_size(double bytes, Units units) {
  static const char* decimal[] = {"B", "kB", "MB", "GB", "TB"};
  static const char* binary[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double step = units == Units::Decimal ? 1000 : 1024;
  const char** names = units == Units::Decimal ? decimal : binary;
  const char* sep = units == Units::Decimal ? "" : " ";
  int u = 0;
  while (bytes >= step && u < 4) {
    bytes /= step;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f%s%s" : "%.1f%s%s", bytes, sep, names[u]);
  return buf;
}

void print_yaml(const nlohmann::json& j, std::ostream& out, int indent) {
  std::string pad(static_cast<size_t>(indent), ' ');
  if (j.is_array()) {
    if (j.empty()) out << pad << "[]\n";
    for (const auto& item : j) {
      if (is_block(item)) {
        out << pad << "-\n";
        print_yaml(item, out, indent + 2);
      } else {
        out << pad << "- " << item.dump() << "\n";
      }
    }
    return;
  }
  if (!j.is_object()) {
    out << pad << j.dump() << "\n";
    return;
  }
  for (const auto& [key, value] : j.items()) {
    out << pad << key << ":";
    if (is_block(value)) {
      out << "\n";
      print_yaml(value, out, indent + 2);
    } else {
      out << " " << value.dump() << "\n";
    }
  }
}

}  // namespace boxlite::cli

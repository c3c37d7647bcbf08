#include "output.hpp"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include <cstdio>
#include <string>

#include "boxlite/error.hpp"

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

std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i) {
    if (i == s.size() || s[i] == sep) {
      out.emplace_back(s.substr(start, i - start));
      start = i + 1;
    }
  }
  return out;
}

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void write_out(int fd, const void* data, size_t len) {
  const char* p = static_cast<const char*>(data);
  while (len > 0) {
    ssize_t n = ::write(fd, p, len);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      throw Error(ErrorKind::Internal, "writing output to fd " + std::to_string(fd) + ": " + std::strerror(errno));
    p += n;
    len -= static_cast<size_t>(n);
  }
}

}  // namespace boxlite::cli
